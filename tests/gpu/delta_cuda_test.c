/* delta_cuda_test.c: the GPU delta encoder and decoder (delta_gpu.h) make
 * and apply the same wire as the host ones, whose own test holds them to a
 * reference written from delta.h: every width, densities 0, one element,
 * 2%, 4.5%, 7%, 50% and 100%, sizes that are multiples of nothing. A GPU
 * wire is compared byte for byte with the host's and applied on the host; a
 * host wire is applied on the GPU; hostile wires are refused on the GPU with
 * the destination untouched. */
#include <stdlib.h>
#include <string.h>

#include "common/delta/delta.h"
#include "common/delta/delta_gpu.h"
#include "tests/gpu/gpu_test.h"
#include "tests/test.h"

#if WSYNC_HAVE_CUDA
#include <cuda_runtime.h>
#endif

static int ngpu;

#if WSYNC_HAVE_CUDA
static uint64_t rng = 0x243f6a8885a308d3ULL;
static uint64_t rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static void make_pair(unsigned char *base, unsigned char *next, size_t n, unsigned w, int permille)
{
    for (size_t i = 0; i < n * w; i++)
        base[i] = (unsigned char)rnd();
    memcpy(next, base, n * w);
    for (size_t i = 0; i < n; i++)
        if (permille < 0 ? i == n / 2 : (int)(rnd() % 1000) < permille)
            next[i * w + rnd() % w] ^= (unsigned char)(1 + rnd() % 255);
}

typedef struct dev {
    unsigned char *base, *next, *out, *dst, *scratch;
} dev_t_;

static int dev_alloc(dev_t_ *d, size_t len, unsigned w)
{
    memset(d, 0, sizeof(*d));
    return cudaMalloc((void **)&d->base, len + 8) != cudaSuccess || cudaMalloc((void **)&d->next, len + 8) ||
           cudaMalloc((void **)&d->out, wsync_delta_bound(len, w)) || cudaMalloc((void **)&d->dst, len + 8) ||
           cudaMalloc((void **)&d->scratch, wsync_delta_gpu_scratch(len, w));
}

static void dev_free(dev_t_ *d)
{
    cudaFree(d->base), cudaFree(d->next), cudaFree(d->out), cudaFree(d->dst), cudaFree(d->scratch);
}

static void one(size_t n, unsigned w, int permille)
{
    size_t len = n * w, cap = wsync_delta_bound(len, w), hl = 0, gl = 0;
    unsigned char *base = malloc(len + 1), *next = malloc(len + 1), *hw = malloc(cap), *gw = malloc(cap);
    unsigned char *back = malloc(len + 1);
    wsync_delta_stats_t hs, gs;
    dev_t_ d;
    make_pair(base, next, n, w, permille);
    CHECK_OK(wsync_delta_encode(base, next, len, w, hw, cap, &hl, &hs));
    CHECK(dev_alloc(&d, len, w) == 0);
    cudaMemcpy(d.base, base, len, cudaMemcpyHostToDevice);
    cudaMemcpy(d.next, next, len, cudaMemcpyHostToDevice);
    CHECK_OK(wsync_delta_gpu_encode(d.base, d.next, len, w, d.out, cap, &gl, &gs, d.scratch, NULL));
    CHECK_EQ(gl, hl);
    CHECK_EQ(gs.chosen, hs.chosen);
    CHECK_EQ(gs.changed, hs.changed);
    cudaMemcpy(gw, d.out, gl <= cap ? gl : cap, cudaMemcpyDeviceToHost);
    CHECK(gl == hl && memcmp(gw, hw, hl) == 0);
    /* The GPU's wire applies on the host; the host's applies on the GPU. */
    memcpy(back, base, len);
    CHECK_OK(wsync_delta_apply(back, len, gw, gl));
    CHECK(memcmp(back, next, len) == 0);
    cudaMemcpy(d.out, hw, hl, cudaMemcpyHostToDevice);
    cudaMemcpy(d.dst, base, len, cudaMemcpyHostToDevice);
    CHECK_OK(wsync_delta_gpu_apply(d.dst, len, d.out, hl, d.scratch, NULL));
    cudaMemcpy(back, d.dst, len, cudaMemcpyDeviceToHost);
    CHECK(memcmp(back, next, len) == 0);
    if (test_case_failed_)
        fprintf(stderr, "  (n %zu, width %u, density %d/1000, form %s, kernels %s)\n", n, w, permille,
                wsync_delta_form_name(hs.chosen), getenv("WSYNC_DELTA_GPU"));
    dev_free(&d);
    free(base), free(next), free(hw), free(gw), free(back);
}
#endif

static void test_same_wire_as_host(void)
{
#if WSYNC_HAVE_CUDA
    /* 9000011 at width 1 is 4395 tiles: three segments of the scan; 550
     * chunks of the one pass at 16 KiB, look-backs past many windows. */
    static const size_t counts[] = {1, 31, 33, 1000, 2049, 65537, 1000003, 9000011};
    static const unsigned widths[] = {1, 2, 4, 8};
    /* 4.5%: the bitmap form, with most chunks of the streaming encoder
     * keeping their changes in their held indices (their words are set from
     * them); 7%: chunks on both sides of that */
    static const int permilles[] = {0, -1, 20, 45, 70, 500, 1000};
    if (ngpu == 0)
        SKIP("no CUDA device");
    /* Every encoder (WSYNC_DELTA_GPU): the one pass in chunks of 16 and
     * 32 KiB, the streaming kernels (v5), then v2's and v1's kernels (their
     * decoders with them). */
    static const char *const kernels[] = {"v3", "v3l", "v5", "v2", "v1"};
    for (int k = 0; k < 5; k++) {
        setenv("WSYNC_DELTA_GPU", kernels[k], 1);
        for (size_t a = 0; a < sizeof(counts) / sizeof(counts[0]); a++)
            for (size_t b = 0; b < 4; b++)
                for (size_t c = 0; c < sizeof(permilles) / sizeof(permilles[0]); c++)
                    one(counts[a], widths[b], permilles[c]);
        unsetenv("WSYNC_DELTA_GPU");
    }
#else
    SKIP("not built with CUDA");
#endif
}

static void test_hostile_refused(void)
{
#if WSYNC_HAVE_CUDA
    size_t n = 5000, w = 2, len = n * w, cap = wsync_delta_bound(len, 2), bl = 0, pl = 0;
    unsigned char *base = malloc(len), *next = malloc(len), *bw = malloc(cap), *pw = malloc(cap),
                  *back = malloc(len);
    wsync_delta_stats_t st;
    dev_t_ d;
    if (ngpu == 0)
        SKIP("no CUDA device");
    make_pair(base, next, n, 2, 100);
    CHECK_OK(wsync_delta_encode(base, next, len, 2, bw, cap, &bl, &st));
    CHECK_EQ(st.chosen, WSYNC_DELTA_BITMAP);
    make_pair(base, next, n, 2, 10);
    CHECK_OK(wsync_delta_encode(base, next, len, 2, pw, cap, &pl, &st));
    CHECK_EQ(st.chosen, WSYNC_DELTA_PAIRS);
    CHECK(dev_alloc(&d, len, 2) == 0);
    cudaMemcpy(d.dst, base, len, cudaMemcpyHostToDevice);
    /* One bit flipped: the popcount disagrees with the count. */
    bw[32 + 7] ^= 0x01;
    cudaMemcpy(d.out, bw, bl, cudaMemcpyHostToDevice);
    CHECK_FAILS(wsync_delta_gpu_apply(d.dst, len, d.out, bl, d.scratch, NULL), WSYNC_ERR_FORMAT, "bitmap marks");
    bw[32 + 7] ^= 0x01;
    /* A wire made for another piece length. */
    CHECK_FAILS(wsync_delta_gpu_apply(d.dst, len - 2, d.out, bl, d.scratch, NULL), WSYNC_ERR_FORMAT,
                "the piece has 9998");
    /* Pairs: an index past n, then one repeated. */
    pw[32 + 4] = 0xff, pw[32 + 5] = 0xff, pw[32 + 6] = 0, pw[32 + 7] = 0;
    cudaMemcpy(d.out, pw, pl, cudaMemcpyHostToDevice);
    CHECK_FAILS(wsync_delta_gpu_apply(d.dst, len, d.out, pl, d.scratch, NULL), WSYNC_ERR_FORMAT, "pair 1 has");
    memcpy(pw + 32 + 4, pw + 32, 4);
    cudaMemcpy(d.out, pw, pl, cudaMemcpyHostToDevice);
    CHECK_FAILS(wsync_delta_gpu_apply(d.dst, len, d.out, pl, d.scratch, NULL), WSYNC_ERR_FORMAT, "strictly");
    CHECK_FAILS(wsync_delta_gpu_apply(d.dst, len, d.out, 20, d.scratch, NULL), WSYNC_ERR_FORMAT, "truncated");
    cudaMemcpy(back, d.dst, len, cudaMemcpyDeviceToHost);
    CHECK(memcmp(back, base, len) == 0);
    dev_free(&d);
    free(base), free(next), free(bw), free(pw), free(back);
#else
    SKIP("not built with CUDA");
#endif
}

int main(void)
{
    ngpu = gpu_count();
    RUN(test_same_wire_as_host);
    RUN(test_hostile_refused);
    TEST_EXIT();
}
