/* dests_copy_bench.c: what writing one in-place chunk through to a caller
 * tensor costs on the host (engine_side/dests.c), against the alternatives:
 *   write-through  recv_dgroup_start: copy into the caller's tensor block by
 *                  block, each block digested right behind the copy;
 *   copy, digest   the host's copy_digest_start: the streamed copy
 *                  (wsync_host_copy), then the digest of the copy;
 *   digest alone   what verifying the chunk in wsync's image costs without
 *                  dests (the floor).
 * Usage: dests_copy_bench [chunk bytes, default 64M] [rounds, default 16] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/digest/digest.h"
#include "common/mem/mem.h"
#include "common/base/util.h"
#include "engine_side/dests.h"

#define NPIECES 4

int main(int argc, char **argv)
{
    uint64_t n = 64ull << 20, t0;
    int rounds = argc > 2 ? atoi(argv[2]) : 16, mode, it, k;
    char *img, *caller;
    wsync_digest_range_t pc[NPIECES], in_caller[NPIECES];
    uint64_t sums[NPIECES];
    static const char *names[] = {"write-through (blocked copy + digest)", "copy, then digest (streamed copy)",
                                  "digest alone (no dests)"};
    if (argc > 1 && wsync_parse_size(argv[1], "the chunk size", &n) != WSYNC_OK) {
        fprintf(stderr, "dests_copy_bench: %s\n", wsync_last_error());
        return 2;
    }
    n = n / (8 * NPIECES) * 8 * NPIECES;
    img = malloc(n);
    caller = malloc(n);
    if (img == NULL || caller == NULL || rounds < 1)
        return 1;
    wsync_fill_pattern(img, n, 0, 1);
    memset(caller, 0, n);
    {
        recv_dest_t d = {.off = 0, .size = n, .ptr = caller, .name = "t"};
        recv_dests_t ds = {.in_place = 1, .n = 1, .d = &d};
        for (k = 0; k < NPIECES; k++) {
            pc[k] = (wsync_digest_range_t){.ptr = img + k * (n / NPIECES),
                                           .len = n / NPIECES,
                                           .off = k * (n / NPIECES)};
            in_caller[k] = pc[k];
            in_caller[k].ptr = caller + k * (n / NPIECES);
        }
        for (mode = 0; mode < 3; mode++) {
            t0 = wsync_now_ns();
            for (it = 0; it < rounds; it++) {
                if (mode == 0) {
                    recv_dgroup_t g;
                    int done = 0;
                    if (recv_dgroup_start(&g, &wsync_mem_host, &ds, img, img, 0, n, pc, NPIECES, 0) != WSYNC_OK ||
                        recv_dgroup_poll(&g, &wsync_mem_host, sums, &done) != WSYNC_OK || !done)
                        return 1;
                    recv_dgroup_end(&g, &wsync_mem_host);
                } else if (mode == 1) {
                    wsync_mem_job_t *j = NULL;
                    if (wsync_mem_host.copy_digest_start(caller, img, n, in_caller, NPIECES, &j) != WSYNC_OK)
                        return 1;
                    wsync_mem_host.job_free(j);
                } else if (wsync_mem_host.digest_many(pc, NPIECES, sums) != WSYNC_OK) {
                    return 1;
                }
            }
            printf("%-40s %6.2f GB/s  (chunk %llu MiB, %d rounds)\n", names[mode],
                   (double)rounds * (double)n / ((double)(wsync_now_ns() - t0) / 1e9) / 1e9,
                   (unsigned long long)(n >> 20), rounds);
        }
    }
    free(img);
    free(caller);
    return 0;
}
