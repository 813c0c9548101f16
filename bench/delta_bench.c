/* delta_bench.c: host throughput of the delta encoder and decoder on one
 * core, in bytes of the piece per second, against memcpy of the same bytes
 * in the same run (the ceiling: the encoder must read base and next, a copy
 * reads one and writes one). bf16 elements, 2% and 10% changed by default.
 * Usage: delta_bench [SIZE_MIB [WIDTH [PERMILLE...]]] (default 128 2 20 100).
 * Median of 5 after a warm-up. WSYNC_DELTA_SIMD=scalar measures the scalar
 * implementation. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/util.h"
#include "common/delta/delta.h"

#define REPS 5

typedef struct bench_ctx {
    unsigned char *base, *next, *out, *dst;
    size_t len, cap, out_len;
    unsigned width;
    uint64_t sink;
} bench_ctx_t;

static void run_memcpy(bench_ctx_t *c)
{
    memcpy(c->dst, c->next, c->len);
    c->sink += c->dst[c->len / 3];
}

static void run_count(bench_ctx_t *c)
{
    wsync_delta_stats_t st;
    if (wsync_delta_count(c->base, c->next, c->len, c->width, &st) == WSYNC_OK)
        c->sink += st.changed;
}

static void run_encode(bench_ctx_t *c)
{
    if (wsync_delta_encode(c->base, c->next, c->len, c->width, c->out, c->cap, &c->out_len, NULL) != WSYNC_OK)
        abort();
    c->sink += c->out_len;
}

/* Applying one wire again to its own result is idempotent: the new values
 * land where they landed before, so every repetition does the same work. */
static void run_apply(bench_ctx_t *c)
{
    if (wsync_delta_apply(c->dst, c->len, c->out, c->out_len) != WSYNC_OK)
        abort();
    c->sink += c->dst[c->len / 5];
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double measure(bench_ctx_t *c, void (*fn)(bench_ctx_t *))
{
    double t[REPS];
    fn(c);
    for (int i = 0; i < REPS; i++) {
        uint64_t t0 = wsync_now_ns();
        fn(c);
        t[i] = (double)(wsync_now_ns() - t0) / 1e9;
    }
    qsort(t, REPS, sizeof(t[0]), cmp_double);
    return (double)c->len / t[REPS / 2] / 1e9;
}

/* next = base with `permille` of its elements changed in their low byte,
 * spread at random as an optimizer step spreads them. */
static void fill(bench_ctx_t *c, unsigned permille)
{
    uint64_t x = 88172645463325252ULL;
    for (size_t i = 0; i < c->len; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        c->base[i] = (unsigned char)x;
    }
    memcpy(c->next, c->base, c->len);
    for (size_t e = 0; e < c->len / c->width; e++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        if (x % 1000 < permille)
            c->next[e * c->width] ^= 1;
    }
}

int main(int argc, char **argv)
{
    bench_ctx_t c = {0};
    size_t mib = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 128;
    unsigned permilles[8] = {20, 100}, np = 2;
    cpu_set_t one;
    c.width = argc > 2 ? (unsigned)atoi(argv[2]) : 2;
    if (argc > 3)
        for (np = 0; np < 8 && 3 + (int)np < argc; np++)
            permilles[np] = (unsigned)atoi(argv[3 + np]);
    if (mib == 0 || wsync_delta_width_for(mib << 20, c.width) != c.width) {
        fprintf(stderr, "usage: delta_bench [SIZE_MIB [WIDTH(1,2,4,8) [PERMILLE...]]]\n");
        return 2;
    }
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    sched_setaffinity(0, sizeof(one), &one);
    c.len = mib << 20;
    c.cap = wsync_delta_bound(c.len, c.width);
    c.base = malloc(c.len), c.next = malloc(c.len), c.dst = malloc(c.len), c.out = malloc(c.cap);
    if (!c.base || !c.next || !c.dst || !c.out) {
        fprintf(stderr, "delta_bench: out of memory for %zu MiB\n", mib);
        return 1;
    }
    printf("delta_bench: %zu MiB, width %u, one core, implementation %s, median of %d\n", mib, c.width,
           wsync_delta_impl(), REPS);
    for (unsigned k = 0; k < np; k++) {
        wsync_delta_stats_t st;
        double mc, cnt, enc, app;
        fill(&c, permilles[k]);
        mc = measure(&c, run_memcpy);
        cnt = measure(&c, run_count);
        enc = measure(&c, run_encode);
        wsync_delta_encode(c.base, c.next, c.len, c.width, c.out, c.cap, &c.out_len, &st);
        memcpy(c.dst, c.base, c.len);
        app = measure(&c, run_apply);
        if (memcmp(c.dst, c.next, c.len) != 0) {
            fprintf(stderr, "delta_bench: apply did not give the new version\n");
            return 1;
        }
        printf("%5.1f%% changed: wire %s %.4f of full | memcpy %6.2f GB/s | count %6.2f GB/s (%.2fx) | encode "
               "%6.2f GB/s (%.2fx) | apply %6.2f GB/s (%.2fx)\n",
               (double)st.changed * 100.0 / (double)st.elems, wsync_delta_form_name(st.chosen),
               (double)c.out_len / (double)c.len, mc, cnt, cnt / mc, enc, enc / mc, app, app / mc);
    }
    free(c.base), free(c.next), free(c.dst), free(c.out);
    return c.sink == 42 ? 3 : 0;
}
