/* gpu_delta_bench.c: the GPU delta encoder and decoder (delta_gpu.h) in
 * bytes of the piece per second, against cudaMemcpy device to device of the
 * same bytes in the same run (the ceiling the issue sets: encode >= 0.8 of
 * it). bf16 elements, 2% and 10% changed by default, spread at random.
 * Usage: gpu_delta_bench [SIZE_MIB [WIDTH [PERMILLE...]]] (default 1024 2 20 100).
 * Median of 10 after a warm-up, each timed with events around the call
 * (which includes its read-back of the count). Bytes counted: the piece's
 * length once per call for all three, so memcpy's rate is half the bytes it
 * moves (reads the piece, writes it), the encode's half of what it must
 * read (both versions), the apply's the piece it leaves: so each ratio is
 * the copy's time over the call's, for calls that move about the same
 * bytes (the copy reads and writes the piece; the encoder reads both
 * versions and writes its wire, a few percent more). Each line gives every
 * encoder (WSYNC_DELTA_GPU=v1, v2, the one pass v3, with 32 KiB chunks v3l,
 * the streaming kernels v5) and the decoders of v1 and v2, each wire
 * applied and checked;
 * the apply is given the header parsed on the host, as a pull that has the
 * wire there does (wsync_delta_gpu_apply_parsed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/delta/delta.h"
#include "common/delta/delta_gpu.h"

#if WSYNC_HAVE_CUDA
#include <cuda_runtime.h>

#define REPS 10

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

typedef struct ctx {
    unsigned char *base, *next, *out, *dst, *scratch;
    size_t len, cap, out_len;
    unsigned w;
    int what;               /* 0 memcpy, 1 encode, 2 apply */
    wsync_delta_header_t h; /* the wire's, parsed on the host (as a pull has the wire there) */
} ctx_t;

static int step(ctx_t *c)
{
    switch (c->what) {
    case 0: return cudaMemcpy(c->dst, c->next, c->len, cudaMemcpyDeviceToDevice) != cudaSuccess;
    case 1:
        return wsync_delta_gpu_encode(c->base, c->next, c->len, c->w, c->out, c->cap, &c->out_len, NULL,
                                      c->scratch, NULL) != WSYNC_OK;
    default: return wsync_delta_gpu_apply_parsed(c->dst, c->len, c->out, &c->h, c->scratch, NULL) != WSYNC_OK;
    }
}

/* One apply of the wire in out onto dst (which holds base). */
static void step_apply_once(ctx_t *c)
{
    c->what = 2;
    if (step(c)) {
        fprintf(stderr, "gpu_delta_bench: apply failed: %s\n", wsync_last_error());
        exit(1);
    }
}

/* Median GB/s (1e9 bytes of the piece per second). */
static double measure(ctx_t *c, int what)
{
    cudaEvent_t a, b;
    float t[REPS];
    c->what = what;
    cudaEventCreate(&a), cudaEventCreate(&b);
    if (step(c)) {
        fprintf(stderr, "gpu_delta_bench: %s failed: %s\n",
                what == 0   ? "memcpy"
                : what == 1 ? "encode"
                            : "apply",
                wsync_last_error());
        exit(1);
    }
    for (int i = 0; i < REPS; i++) {
        cudaEventRecord(a, NULL);
        step(c);
        cudaEventRecord(b, NULL);
        cudaEventSynchronize(b);
        cudaEventElapsedTime(&t[i], a, b);
    }
    qsort(t, REPS, sizeof(t[0]), cmp_f);
    cudaEventDestroy(a), cudaEventDestroy(b);
    return (double)c->len / (t[REPS / 2] / 1e3) / 1e9;
}

int main(int argc, char **argv)
{
    ctx_t c = {0};
    size_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 1024;
    unsigned permilles[8] = {20, 100}, np = 2;
    unsigned char *host;
    uint64_t x = 88172645463325252ULL;
    int dev = 0;
    struct cudaDeviceProp prop;
    c.w = argc > 2 ? (unsigned)atoi(argv[2]) : 2;
    if (argc > 3)
        for (np = 0; np < 8 && 3 + (int)np < argc; np++)
            permilles[np] = (unsigned)atoi(argv[3 + np]);
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        printf("gpu_delta_bench: skipped: no CUDA device\n");
        return 0;
    }
    c.len = mib << 20;
    c.cap = wsync_delta_bound(c.len, c.w);
    host = malloc(c.len);
    if (host == NULL || cudaMalloc((void **)&c.base, c.len) || cudaMalloc((void **)&c.next, c.len) ||
        cudaMalloc((void **)&c.out, c.cap) || cudaMalloc((void **)&c.dst, c.len) ||
        cudaMalloc((void **)&c.scratch, wsync_delta_gpu_scratch(c.len, c.w))) {
        fprintf(stderr, "gpu_delta_bench: out of memory for %zu MiB\n", mib);
        return 1;
    }
    for (size_t i = 0; i < c.len; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        host[i] = (unsigned char)x;
    }
    cudaMemcpy(c.base, host, c.len, cudaMemcpyHostToDevice);
    printf("gpu_delta_bench: %s, %zu MiB, width %u, median of %d; GB/s = the piece's bytes (one version) per "
           "second: memcpy moves 2x that (read + write), the encode reads 2x (both versions) plus its wire\n",
           prop.name, mib, c.w, REPS);
    for (unsigned k = 0; k < np; k++) {
        wsync_delta_stats_t st;
        unsigned char *check = malloc(c.len), hdr[WSYNC_DELTA_HEADER];
        cudaMemcpy(host, c.base, c.len, cudaMemcpyDeviceToHost);
        for (size_t e = 0; e < c.len / c.w; e++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            if (x % 1000 < permilles[k])
                host[e * c.w] ^= 1;
        }
        cudaMemcpy(c.next, host, c.len, cudaMemcpyHostToDevice);
        static const char *const kern[5] = {"v1", "v2", "v3", "v3l", "v5"};
        double mc = measure(&c, 0), enc[5], app[2];
        for (int v = 0; v < 5; v++) { /* WSYNC_DELTA_GPU: each encoder; the decoders of v1 and v2 */
            setenv("WSYNC_DELTA_GPU", kern[v], 1);
            enc[v] = measure(&c, 1);
            wsync_delta_gpu_encode(c.base, c.next, c.len, c.w, c.out, c.cap, &c.out_len, &st, c.scratch, NULL);
            cudaMemcpy(hdr, c.out, sizeof(hdr), cudaMemcpyDeviceToHost);
            if (wsync_delta_parse_header(hdr, c.out_len, c.len, &c.h) != WSYNC_OK) {
                fprintf(stderr, "gpu_delta_bench: encode %s: %s\n", kern[v], wsync_last_error());
                return 1;
            }
            cudaMemcpy(c.dst, c.base, c.len, cudaMemcpyDeviceToDevice);
            if (v < 2)
                app[v] = measure(&c, 2);
            else
                step_apply_once(&c);
            cudaMemcpy(check, c.dst, c.len, cudaMemcpyDeviceToHost);
            if (memcmp(check, host, c.len) != 0) {
                fprintf(stderr, "gpu_delta_bench: encode %s then apply did not give the new version\n", kern[v]);
                return 1;
            }
        }
        free(check);
        printf("%5.1f%% changed: wire %s %.4f of full | D2D memcpy %7.1f GB/s | encode",
               (double)st.changed * 100.0 / (double)st.elems, wsync_delta_form_name(st.chosen),
               (double)c.out_len / (double)c.len, mc);
        for (int v = 0; v < 5; v++)
            printf(" %s %7.1f (%.2fx)", kern[v], enc[v], enc[v] / mc);
        printf(" | apply v1 %7.1f (%.2fx) v2 %7.1f (%.2fx)\n", app[0], app[0] / mc, app[1], app[1] / mc);
    }
    return 0;
}
#else
int main(void)
{
    printf("gpu_delta_bench: skipped: not built with CUDA\n");
    return 0;
}
#endif
