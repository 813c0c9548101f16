/* fp8_wire_test.c: FP8 destinations in the node plan (fp8_wire.h). A
 * [300, 256] BF16 weight (a partial last band) quantized whole into one
 * FP8 destination, under a layout where one rank holds it all, FSDP
 * layouts of 2 ranks (shards of 150 rows: band 1 shared) and of 8 (38
 * rows: every band shared by 2 to 4 ranks), even shards of 3 ranks, and
 * two ranks split inside a BF16 value: the plan's puts, executed here from
 * the trainer image and each rank's quantized bands (wsync_fp8_bruns,
 * quantized with the host quantizer; a shared band's parts each with the
 * block maxima of all its parts, as the trainer ranks exchange them), then
 * the aux bands quantized as the engine does, give exactly
 * wsync_target_fill_host's destination image; only a band whose extents cut
 * a value goes to the aux area (its source rows), and the codes move at
 * half the bytes of BF16. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/model/manifest.h"
#include "common/model/plan.h"
#include "common/quant/quant.h"
#include "common/targets/fp8_wire.h"
#include "common/targets/target_plan.h"
#include "tests/test.h"

#define R 300
#define C 256

static wsync_manifest_t *manifest(void)
{
    wsync_manifest_t *m = NULL;
    int64_t n[1] = {64}, s[2] = {R, C};
    if (wsync_manifest_create(&m) != WSYNC_OK || wsync_manifest_add(m, "norm", WSYNC_DTYPE_BF16, 1, n) != WSYNC_OK ||
        wsync_manifest_add(m, "w", WSYNC_DTYPE_BF16, 2, s) != WSYNC_OK) {
        wsync_manifest_free(m);
        return NULL;
    }
    return m;
}

static wsync_target_t *fp8_target(const wsync_manifest_t *m)
{
    wsync_target_t *t = NULL;
    wsync_fp8_spec_t spec = {128, 128, WSYNC_SCALE_FP32};
    wsync_block_t bn = {.src = 0, .src_stop = {64}}, bw = {.src = 1, .src_stop = {R, C}};
    int64_t n[1] = {64}, s[2] = {R, C};
    if (wsync_target_create(&t) != WSYNC_OK || wsync_target_add_dest(t, "norm", WSYNC_DTYPE_BF16, 1, n) ||
        wsync_target_add_block(t, &bn) || wsync_target_add_dest(t, "w", WSYNC_DTYPE_F8_E4M3, 2, s) ||
        wsync_target_add_block(t, &bw) || wsync_target_set_fp8(t, &spec, NULL) || wsync_target_finish(t, m)) {
        wsync_target_free(t);
        return NULL;
    }
    return t;
}

/* The byte of the trainer side at src_off: the image, or a quantized band. */
typedef struct side {
    const wsync_manifest_t *m;
    const uint8_t *image;
    wsync_fp8_brun_t *br;
    size_t nbr;
    uint8_t **q; /* [nbr]: codes then scales */
} side_t;

static int side_byte(const side_t *s, uint64_t off, uint8_t *out)
{
    size_t k;
    if (off < s->m->image_size) {
        *out = s->image[off];
        return 1;
    }
    for (k = 0; k < s->nbr; k++) {
        const wsync_fp8_brun_t *b = &s->br[k];
        if (off >= b->q_off && off < b->q_off + b->q_len) {
            *out = s->q[k][off - b->q_off];
            return 1;
        }
        if (off >= b->s_off && off < b->s_off + b->s_len) {
            *out = s->q[k][b->q_len + off - b->s_off];
            return 1;
        }
    }
    return 0;
}

/* Runs the one-rank plan under `layout` (the trainer ranks' parts of shared
 * bands quantized with the maxima of every part) and the engine's aux
 * quantization; compares with fill_host. *aux_bands: how many bands went to
 * the aux area; *parts: how many band parts the ranks quantized. */
static void check_layout(const wsync_manifest_t *m, const wsync_target_t *t, const wsync_layout_t *layout,
                         const uint8_t *image, size_t *aux_bands, size_t *parts)
{
    const wsync_target_t *one[1] = {t};
    wsync_node_plan_t *np = NULL;
    wsync_fp8_aux_t *aux = NULL;
    wsync_run2d_t *runs = NULL;
    size_t naux = 0, nruns = 0, k, j;
    uint64_t aux_len = 0, len = 0, i, row;
    uint8_t *want = calloc(1, t->image_size), *got = NULL;
    side_t s = {.m = m, .image = image};
    int missing = 0;
    *parts = 0;
    CHECK_OK(wsync_target_fill_host(t, m, image, want));
    CHECK_OK(wsync_node_plan_build(m, layout, 1, one, 64 * 1024, NULL, &np));
    CHECK_OK(wsync_target_wire_runs(t, m, layout, &runs, &nruns, &aux, &naux, &aux_len));
    CHECK_OK(wsync_target_wire_size(t, m, layout, &len));
    CHECK_EQ(len, t->image_size + aux_len);
    got = calloc(1, len);
    CHECK(np != NULL && got != NULL);
    if (np == NULL || got == NULL)
        goto out;
    CHECK_EQ(np->nfp8, 1);
    {
        wsync_fp8_exts_t *x = NULL;
        size_t cap = 0;
        CHECK_OK(wsync_fp8_exts_make(layout, &x));
        CHECK_OK(wsync_fp8_bruns(m, x, &np->fp8[0], -1, &s.br, &s.nbr, &cap));
        wsync_fp8_exts_free(x);
    }
    s.q = calloc(s.nbr + 1, sizeof(*s.q));
    for (k = 0; k < s.nbr; k++) { /* each owner quantizes its bands from its rows */
        const wsync_fp8_brun_t *b = &s.br[k];
        float amax[C / 128] = {0};
        s.q[k] = malloc(b->q_len + b->s_len);
        if (!b->part) {
            CHECK_OK(wsync_fp8_quantize_host(image + b->src_off, WSYNC_QSRC_BF16, b->rows, b->cols,
                                             &np->fp8[0].spec, s.q[k], (float *)(s.q[k] + b->q_len), "w"));
            continue;
        }
        for (j = 0; j < s.nbr; j++) /* the exchange: every part's block maxima */
            if (s.br[j].part && s.br[j].slice == b->slice && s.br[j].b0 == b->b0)
                CHECK_OK(wsync_fp8_part_amax_host(image + s.br[j].src_off, WSYNC_QSRC_BF16, s.br[j].e0,
                                                  s.br[j].q_len, C, &np->fp8[0].spec, amax, "w"));
        wsync_fp8_part_quantize_host(image + b->src_off, WSYNC_QSRC_BF16, b->e0, b->q_len, C, &np->fp8[0].spec,
                                     amax, s.q[k], b->s_len ? (float *)(s.q[k] + b->q_len) : NULL);
        *parts += 1;
    }
    for (k = 0; k < np->nputs; k++) { /* the trainer packs, the engine lands */
        const wsync_tput_t *pu = &np->puts[k];
        for (j = 0; j < pu->nruns; j++) {
            const wsync_run2d_t *r = &np->runs[pu->first_run + j];
            for (row = 0; row < r->rows; row++)
                for (i = 0; i < r->row_bytes; i++)
                    missing += !side_byte(&s, r->src_off + row * r->src_stride + i,
                                          got + pu->dst_off + r->dst_off + row * r->row_bytes + i);
        }
    }
    CHECK_EQ(missing, 0);
    for (k = 0; k < naux; k++) { /* the engine quantizes the boundary bands */
        const wsync_fp8_aux_t *a = &aux[k];
        const wsync_dest_t *d = &t->dests[a->dest], *sd = &t->dests[d->scale_dest];
        uint8_t q[128 * C];
        float sc[2];
        CHECK_OK(wsync_fp8_quantize_host(got + a->aux_off, a->fmt, a->rows, a->cols, &d->fp8, q, sc, "w"));
        for (row = 0; row < a->rows; row++)
            memcpy(got + d->offset + (a->row0 + row) * C + a->col0, q + row * a->cols, a->cols);
        memcpy(got + sd->offset + 4 * ((a->row0 / 128) * 2 + a->col0 / 128), sc, 4 * ((a->cols + 127) / 128));
    }
    CHECK(memcmp(got, want, t->image_size) == 0);
    *aux_bands = naux;
out:
    for (k = 0; s.q && k < s.nbr; k++)
        free(s.q[k]);
    free(s.q);
    free(s.br);
    free(runs);
    free(aux);
    free(want);
    free(got);
    wsync_node_plan_free(np);
}

/* Two ranks split at a byte inside a BF16 value of w's band 1. */
static wsync_status_t odd_layout(const wsync_manifest_t *m, wsync_layout_t **out)
{
    const uint64_t cut = m->tensors[1].offset + 150 * C * 2 + 1;
    wsync_extent_t a = {0, cut}, b = {cut, m->image_size - cut};
    const wsync_extent_t *ex[2] = {&a, &b};
    size_t n[2] = {1, 1};
    return wsync_layout_explicit(m->image_size, 2, n, ex, out);
}

static void plan_moves_fp8_like_fill_host(void)
{
    wsync_manifest_t *m = manifest();
    wsync_target_t *t = m ? fp8_target(m) : NULL;
    wsync_layout_t *one = NULL, *fsdp = NULL, *even = NULL, *odd = NULL;
    uint8_t *image;
    size_t naux = 99, parts = 0;
    uint64_t i;
    CHECK(t != NULL);
    if (t == NULL) {
        wsync_manifest_free(m);
        return;
    }
    image = malloc(m->image_size);
    for (i = 0; i < m->image_size / 2; i++) /* finite BF16 over a few binades */
        ((uint16_t *)image)[i] = (uint16_t)(0x3800 + (i * 2654435761u >> 7) % 0x1000) | (uint16_t)((i & 1) << 15);
    CHECK_OK(wsync_layout_even(m->image_size, 1, &one));
    check_layout(m, t, one, image, &naux, &parts);
    CHECK_EQ(naux, 0); /* one rank holds every band */
    CHECK_EQ(parts, 0);
    CHECK_OK(wsync_layout_fsdp(m, 2, &fsdp));
    check_layout(m, t, fsdp, image, &naux, &parts);
    CHECK_EQ(naux, 0); /* rows [0, 150) and [150, 300): band 1 (rows 128..255) in two parts */
    CHECK_EQ(parts, 2);
    wsync_layout_free(fsdp);
    CHECK_OK(wsync_layout_fsdp(m, 8, &fsdp));
    check_layout(m, t, fsdp, image, &naux, &parts);
    CHECK_EQ(naux, 0); /* thin shards of 38 rows: every band in parts (4 + 4 + 2) */
    CHECK_EQ(parts, 10);
    CHECK_OK(wsync_layout_even(m->image_size, 3, &even));
    check_layout(m, t, even, image, &naux, &parts);
    CHECK(naux + parts >= 2);
    CHECK_OK(odd_layout(m, &odd)); /* a cut inside a BF16 value: the aux path */
    check_layout(m, t, odd, image, &naux, &parts);
    CHECK_EQ(naux, 1);
    wsync_layout_free(odd);
    free(image);
    wsync_layout_free(one);
    wsync_layout_free(fsdp);
    wsync_layout_free(even);
    wsync_target_free(t);
    wsync_manifest_free(m);
}

/* FP8 bytes on the wire: codes + scales against the BF16 a node would take. */
static void codes_move_at_half_the_bytes(void)
{
    wsync_manifest_t *m = manifest();
    wsync_target_t *t = m ? fp8_target(m) : NULL, *id = NULL;
    wsync_layout_t *one = NULL;
    wsync_node_plan_t *a = NULL, *b = NULL;
    CHECK(t != NULL);
    if (t == NULL) {
        wsync_manifest_free(m);
        return;
    }
    CHECK_OK(wsync_layout_even(m->image_size, 1, &one));
    CHECK_OK(wsync_target_identity(m, &id));
    {
        const wsync_target_t *x[1] = {t}, *y[1] = {id};
        CHECK_OK(wsync_node_plan_build(m, one, 1, x, 64 * 1024, NULL, &a));
        CHECK_OK(wsync_node_plan_build(m, one, 1, y, 64 * 1024, NULL, &b));
    }
    if (a && b) {
        CHECK_EQ(a->network_bytes, 128 + R * C + 4 * 3 * 2); /* norm, codes, 3 x 2 scales */
        CHECK(a->network_bytes * 100 <= b->network_bytes * 51);
    }
    wsync_node_plan_free(a);
    wsync_node_plan_free(b);
    wsync_target_free(id);
    wsync_target_free(t);
    wsync_layout_free(one);
    wsync_manifest_free(m);
}

/* Delta wires' element width in the quantized space: 1 among a tensor's
 * codes (one per source element, padded to 16 bytes), 4 among its scales;
 * the same in every spec's space. */
static void elem_width_codes_and_scales(void)
{
    wsync_manifest_t *m = manifest();
    wsync_fp8_spec_t a = {128, 128, WSYNC_SCALE_FP32}, b = {64, 32, WSYNC_SCALE_UE8M0};
    const wsync_fp8_spec_t *specs[2] = {&a, &b};
    uint64_t base, w;
    int k;
    CHECK(m != NULL);
    if (m == NULL)
        return;
    w = m->tensors[1].offset;
    for (k = 0; k < 2; k++) {
        CHECK_OK(wsync_fp8_space(m, specs[k], &base));
        CHECK_EQ(wsync_fp8_elem_width(m, base + w), 1);
        CHECK_EQ(wsync_fp8_elem_width(m, base + w + R * C - 1), 1);
        CHECK_EQ(wsync_fp8_elem_width(m, base + w + R * C), 4); /* R * C is a multiple of 16 */
        CHECK_EQ(wsync_fp8_elem_width(m, base + w + R * C + 4 * 3 * 2 - 1), 4);
        CHECK_EQ(wsync_fp8_elem_width(m, base + 5), 1); /* the norm's codes */
    }
    wsync_manifest_free(m);
}

int main(void)
{
    RUN(plan_moves_fp8_like_fill_host);
    RUN(codes_move_at_half_the_bytes);
    RUN(elem_width_codes_and_scales);
    TEST_EXIT();
}
