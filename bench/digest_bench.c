/* digest_bench.c: CPU throughput of the piece digest on one core, against the
 * two ceilings that bound it in the same run: memcpy bandwidth (the cost of
 * touching the bytes) and XXH3_64bits (a fast non-cryptographic hash).
 * Usage: digest_bench [SIZE_MIB] (default 256). Median of 5 after a warm-up. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/digest/digest.h"
#include "common/digest/digest_impl.h"
#include "common/base/util.h"

#define REPS 5

typedef struct bench_ctx {
    unsigned char *src, *dst;
    size_t len;
    uint64_t sink; /* results fold in here so no run is optimized away */
} bench_ctx_t;

static void run_digest(bench_ctx_t *c)
{
    c->sink += wsync_digest(c->src, c->len, 0);
}

/* The implementation under test for run_impl (scalar, AVX2, AVX-512). */
static wsync_digest_sum_fn impl_fn;

static void run_impl(bench_ctx_t *c)
{
    c->sink += impl_fn(c->src, c->len, 0);
}

static void run_memcpy(bench_ctx_t *c)
{
    memcpy(c->dst, c->src, c->len);
    c->sink += c->dst[c->len / 3];
}

static void run_xxh3(bench_ctx_t *c)
{
    c->sink += XXH3_64bits(c->src, c->len);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median GB/s (1e9 bytes per second) of REPS runs after one warm-up run. */
static double measure(bench_ctx_t *c, void (*fn)(bench_ctx_t *))
{
    double t[REPS];
    int i;
    fn(c);
    for (i = 0; i < REPS; i++) {
        uint64_t t0 = wsync_now_ns();
        fn(c);
        t[i] = (double)(wsync_now_ns() - t0) / 1e9;
    }
    qsort(t, REPS, sizeof(t[0]), cmp_double);
    return (double)c->len / t[REPS / 2] / 1e9;
}

int main(int argc, char **argv)
{
    bench_ctx_t c = {0};
    size_t mib = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 256;
    cpu_set_t one;
    double dg, mc, xx;
    int cpu = sched_getcpu();

    if (mib == 0) {
        fprintf(stderr, "usage: digest_bench [SIZE_MIB]\n");
        return 2;
    }
    /* One core: pin to the core we started on so the figure is per core. */
    CPU_ZERO(&one);
    CPU_SET(cpu < 0 ? 0 : cpu, &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0)
        perror("digest_bench: sched_setaffinity (continuing unpinned)");
    c.len = mib << 20;
    c.src = aligned_alloc(4096, c.len);
    c.dst = aligned_alloc(4096, c.len);
    if (c.src == NULL || c.dst == NULL) {
        fprintf(stderr, "digest_bench: cannot allocate 2 x %zu MiB\n", mib);
        return 1;
    }
    /* Non-zero, position-dependent data; dst touched so memcpy pays no page faults. */
    wsync_fill_pattern(c.src, c.len, 0, 0x5eed);
    memset(c.dst, 1, c.len);

    dg = measure(&c, run_digest);
    mc = measure(&c, run_memcpy);
    xx = measure(&c, run_xxh3);

    printf("digest_bench: %zu MiB buffer, one core (cpu %d), median of %d after a warm-up\n", mib, cpu, REPS);
    printf("  wsync_digest   %7.2f GB/s   (the implementation wsync picks on this CPU)\n", dg);
    printf("  memcpy         %7.2f GB/s   (ceiling: bytes moved once)\n", mc);
    printf("  XXH3_64bits    %7.2f GB/s   (ceiling: fast non-cryptographic hash)\n", xx);
    printf("  digest/memcpy  %7.2f\n", dg / mc);
    printf("  digest/xxh3    %7.2f\n", dg / xx);
    {
        static const char *names[] = {"scalar", "AVX2", "AVX-512"};
        wsync_digest_sum_fn fns[3] = {wsync_digest_sum_scalar, wsync_digest_sum_avx2_fn(),
                                      wsync_digest_sum_avx512_fn()};
        int k;
        for (k = 0; k < 3; k++) {
            if (fns[k] == NULL) {
                printf("    %-10s  (not supported by this CPU)\n", names[k]);
                continue;
            }
            impl_fn = fns[k];
            printf("    %-10s %7.2f GB/s\n", names[k], measure(&c, run_impl));
        }
    }
    printf("  requirement    >= 5 GB/s per core: %s\n", dg >= 5.0 ? "met" : "NOT met");
    printf("  (sink %016llx)\n", (unsigned long long)c.sink);
    free(c.src);
    free(c.dst);
    return 0;
}
