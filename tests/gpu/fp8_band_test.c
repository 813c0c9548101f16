/* fp8_band_test.c (GPU): a trainer's FP8 band pack on the GPU
 * (trainer_side/fp8_pack.h: the pack kernel gathers a band's source rows,
 * the FP8 kernel quantizes them) equals the destination image
 * wsync_target_fill_host makes on the host, byte for byte, for every band of
 * every FP8 destination of a DeepSeek-shaped target (fused qkv, a column
 * slice, MLA's partial-block q_a_proj, stacked experts), in bands that cut
 * fused blocks and column-slice runs; without CUDA it says why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/status.h"
#include "common/model/manifest.h"
#include "common/targets/rules.h"
#include "tests/gpu/gpu_test.h"
#include "tests/test.h"
#include "trainer_side/fp8_pack.h"

#if WSYNC_HAVE_CUDA
#include <cuda_runtime.h>
#endif

static int ngpu;

static wsync_manifest_t *model(void)
{
    static const struct {
        const char *name;
        int64_t r, c;
    } ts[] = {
        {"model.layers.0.self_attn.q_proj.weight", 256, 256},
        {"model.layers.0.self_attn.k_proj.weight", 128, 256},
        {"model.layers.0.self_attn.v_proj.weight", 128, 256},
        {"model.layers.0.self_attn.o_proj.weight", 256, 256},
        {"model.layers.0.self_attn.q_a_proj.weight", 200, 256},
        {"model.layers.0.mlp.gate.weight", 2, 256},
        {"model.layers.0.mlp.experts.0.gate_proj.weight", 128, 256},
        {"model.layers.0.mlp.experts.0.up_proj.weight", 128, 256},
        {"model.layers.0.mlp.experts.0.down_proj.weight", 256, 128},
        {"model.layers.0.mlp.experts.1.gate_proj.weight", 128, 256},
        {"model.layers.0.mlp.experts.1.up_proj.weight", 128, 256},
        {"model.layers.0.mlp.experts.1.down_proj.weight", 256, 128},
    };
    wsync_manifest_t *m = NULL;
    size_t i;
    if (wsync_manifest_create(&m) != WSYNC_OK)
        return NULL;
    for (i = 0; i < sizeof(ts) / sizeof(ts[0]); i++) {
        int64_t s[2] = {ts[i].r, ts[i].c};
        if (wsync_manifest_add(m, ts[i].name, WSYNC_DTYPE_BF16, 2, s) != WSYNC_OK) {
            wsync_manifest_free(m);
            return NULL;
        }
    }
    return m;
}

static void gpu_bands_equal_the_host_image(void)
{
#if WSYNC_HAVE_CUDA
    wsync_manifest_t *m = model();
    wsync_rules_t *r = NULL;
    wsync_target_t *t = NULL;
    unsigned char *src = NULL, *img = NULL, *q = NULL;
    float *sc = NULL;
    void *d_src = NULL, *d_tmp = NULL, *d_q = NULL, *d_s = NULL;
    uint64_t i, x = 0x9e3779b97f4a7c15ull;
    size_t di, k, nb;
    int bad = 0, bands = 0;
    if (ngpu == 0)
        SKIP("no CUDA device");
    CHECK(m != NULL);
    CHECK_OK(wsync_rules_load("configs/rules/deepseek-fp8.json", &r));
    CHECK_OK(wsync_target_from_rules(m, r, 1, 0, &t));
    if (t == NULL)
        goto out;
    src = malloc(m->image_size);
    img = malloc(t->image_size);
    q = malloc(t->image_size);
    sc = malloc(t->image_size);
    for (i = 0; i + 1 < m->image_size; i += 2) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        src[i] = (unsigned char)x;
        src[i + 1] = (unsigned char)(((x >> 8) & 0x80) | (0x20 + (x >> 16) % 0x30));
    }
    CHECK_OK(wsync_target_fill_host(t, m, src, img));
    CHECK(cudaMalloc(&d_src, m->image_size) == cudaSuccess && cudaMalloc(&d_tmp, t->image_size * 2) == cudaSuccess &&
          cudaMalloc(&d_q, t->image_size) == cudaSuccess && cudaMalloc(&d_s, t->image_size) == cudaSuccess);
    CHECK(cudaMemcpy(d_src, src, m->image_size, cudaMemcpyHostToDevice) == cudaSuccess);
    for (di = 0; di < t->ndests; di++) {
        wsync_fp8_band_t *b = NULL;
        if (!t->dests[di].is_fp8)
            continue;
        CHECK_OK(wsync_fp8_bands(t, di, 40000, &b, &nb));
        for (k = 0; k < nb; k++, bands++) {
            CHECK_OK(wsync_fp8_band_pack_cuda(t, m, &b[k], d_src, d_tmp, d_q, d_s));
            CHECK(cudaMemcpy(q, d_q, b[k].q_len, cudaMemcpyDeviceToHost) == cudaSuccess &&
                  cudaMemcpy(sc, d_s, b[k].s_len, cudaMemcpyDeviceToHost) == cudaSuccess);
            if (memcmp(q, img + b[k].q_off, b[k].q_len) || memcmp(sc, img + b[k].s_off, b[k].s_len)) {
                fprintf(stderr, "  '%s' band %zu (rows %llu..): GPU differs from the host image\n",
                        t->dests[di].name, k, (unsigned long long)b[k].row0);
                bad++;
            }
        }
        free(b);
    }
    CHECK_EQ(bad, 0);
    CHECK(bands >= 10);
out:
    cudaFree(d_src), cudaFree(d_tmp), cudaFree(d_q), cudaFree(d_s);
    free(src), free(img), free(q), free(sc);
    wsync_target_free(t);
    wsync_rules_free(r);
    wsync_manifest_free(m);
#else
    SKIP("built without CUDA");
#endif
}

static void without_gpu_it_says_why(void)
{
    wsync_manifest_t *m = model();
    wsync_rules_t *r = NULL;
    wsync_target_t *t = NULL;
    wsync_fp8_band_t *b = NULL;
    size_t nb = 0;
    char scratch[16];
    if (ngpu > 0)
        SKIP("a CUDA device is present");
    CHECK(m != NULL);
    CHECK_OK(wsync_rules_load("configs/rules/deepseek-fp8.json", &r));
    CHECK_OK(wsync_target_from_rules(m, r, 1, 0, &t));
    if (t != NULL)
        CHECK_OK(wsync_fp8_bands(t, 0, 1 << 20, &b, &nb));
    if (nb > 0) {
        wsync_error_clear();
        CHECK(wsync_fp8_band_pack_cuda(t, m, &b[0], scratch, scratch, (uint8_t *)scratch,
                                       (float *)(void *)scratch) != WSYNC_OK);
        CHECK(wsync_last_error()[0] != '\0');
    }
    free(b);
    wsync_target_free(t);
    wsync_rules_free(r);
    wsync_manifest_free(m);
}

int main(void)
{
    ngpu = gpu_count();
    RUN(gpu_bands_equal_the_host_image);
    RUN(without_gpu_it_says_why);
    TEST_EXIT();
}
