/* quant_test.c: the host FP8 quantizer against independent lines written
 * from the format and docs/FP8.md: every e4m3fn value from its sign,
 * exponent and mantissa fields; the nearest value found by search over all
 * 254 finite codes (ties to the even code, saturation at 448) for random,
 * midpoint, subnormal and out-of-range inputs; scales (fp32, UE8M0, zero
 * blocks); a matrix with partial edge blocks in bf16 and fp32; NaN and
 * infinity refused naming the tensor, row and column; the GPU kernel's
 * quotient (qm_quot: a multiply and two FMAs) gives the IEEE division's code
 * over every bf16 x of sampled block maxima (the whole range was checked
 * once, 5.3e8 pairs per form: docs/FP8.md). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/quant/quant.h"
#include "common/quant/quant_math.h"
#include "tests/test.h"

/* e4m3fn from its fields: bias 7, no infinities, S.1111.111 is NaN. */
static double value_of(int code)
{
    int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
    double v = e == 0 ? m / 8.0 * pow(2, -6) : (1 + m / 8.0) * pow(2, e - 7);
    return s ? -v : v;
}

static uint8_t nearest(float x)
{
    int best = -1, c;
    double bd = 0;
    for (c = 0; c < 256; c++) {
        double d;
        if ((c & 0x7f) == 0x7f || (signbit(x) ? !(c & 0x80) : (c & 0x80)))
            continue;
        d = fabs(value_of(c) - (double)x);
        if (best < 0 || d < bd || (d == bd && (c & 1) == 0)) {
            best = c;
            bd = d;
        }
    }
    return (uint8_t)best;
}

static uint32_t rng = 12345;
static uint32_t rnd(void)
{
    rng = rng * 1664525u + 1013904223u;
    return rng >> 8;
}

static void every_code_decodes_to_its_value_and_back(void)
{
    int c;
    for (c = 0; c < 256; c++) {
        if ((c & 0x7f) == 0x7f) {
            CHECK(isnan(wsync_fp8_e4m3_decode((uint8_t)c)));
            continue;
        }
        CHECK((double)wsync_fp8_e4m3_decode((uint8_t)c) == value_of(c));
        CHECK_EQ(wsync_fp8_e4m3_encode((float)value_of(c)), c);
    }
    CHECK(value_of(0x7e) == 448.0);
}

static void encode_is_the_nearest_code_ties_to_even(void)
{
    int i, c, bad = 0;
    for (i = 0; i < 200000 && bad < 5; i++) {
        float x;
        switch (i % 4) {
        case 0: x = ((float)rnd() / (1 << 24) * 2 - 1) * 500; break;
        case 1: x = ((float)rnd() / (1 << 24) * 2 - 1) * 0.03f; break;
        case 2: x = ((float)rnd() / (1 << 24) * 2 - 1) * 1e-4f; break;
        default: x = ((float)rnd() / (1 << 24) * 2 - 1) * 5; break;
        }
        if (wsync_fp8_e4m3_encode(x) != nearest(x))
            bad++, fprintf(stderr, "  %.9g -> %02x, nearest %02x\n", x, wsync_fp8_e4m3_encode(x), nearest(x));
    }
    /* exact midpoints between neighbours, both signs */
    for (c = 0; c < 0x7e && bad < 10; c++) {
        float mid = (float)((value_of(c) + value_of(c + 1)) / 2);
        if (wsync_fp8_e4m3_encode(mid) != nearest(mid) || wsync_fp8_e4m3_encode(-mid) != nearest(-mid))
            bad++, fprintf(stderr, "  midpoint %.9g -> %02x, nearest %02x\n", mid, wsync_fp8_e4m3_encode(mid),
                           nearest(mid));
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(wsync_fp8_e4m3_encode(1e30f), 0x7e);
    CHECK_EQ(wsync_fp8_e4m3_encode(-460.0f), 0xfe);
    CHECK_EQ(wsync_fp8_e4m3_encode(-0.0f), 0x80);
    CHECK_EQ(wsync_fp8_e4m3_encode(1e-30f), 0x00);
}

static void gpu_quotient_gives_the_division_code(void)
{
    uint32_t am, xb;
    int form, bad = 0;
    for (form = 0; form < 2; form++)
        for (am = 0x0d80; am < 0x7f80; am += 97) { /* bf16 bits: 2^-100 up to the largest finite */
            const float amax = qm_bf16((uint16_t)am), s = qm_scale(amax, form), r = 1.0f / s;
            for (xb = 0; xb <= am && bad < 5; xb++) {
                const float x = qm_bf16((uint16_t)xb);
                if (qm_encode_mag(qm_quot(x, s, r)) != (wsync_fp8_e4m3_encode(x / s) & 0x7fu))
                    bad++, fprintf(stderr, "  form %d amax %a x %a: quotient's code differs\n", form, amax, x);
            }
        }
    CHECK_EQ(bad, 0);
    CHECK(QM_QUOT_MIN_AMAX <= 0x1p-100f);
}

static void scales_fp32_ue8m0_and_zero(void)
{
    int i;
    CHECK(wsync_fp8_scale(0.0f, WSYNC_SCALE_FP32) == 1.0f);
    CHECK(wsync_fp8_scale(0.0f, WSYNC_SCALE_UE8M0) == 1.0f);
    CHECK(wsync_fp8_scale(448.0f, WSYNC_SCALE_UE8M0) == 1.0f);
    CHECK(wsync_fp8_scale(449.0f, WSYNC_SCALE_UE8M0) == 2.0f);
    for (i = 0; i < 10000; i++) {
        float a = ldexpf((float)(rnd() | 1) / (1 << 24), (int)(rnd() % 200) - 140);
        float s = wsync_fp8_scale(a, WSYNC_SCALE_FP32), u = wsync_fp8_scale(a, WSYNC_SCALE_UE8M0);
        int e;
        CHECK(s == a / 448.0f);
        CHECK(frexpf(u, &e) == 0.5f); /* a power of two */
        CHECK(u >= s && (u / 2 < s || u == ldexpf(1, -149)));
        if (test_case_failed_)
            break;
    }
}

static void matrix_with_edge_blocks(void)
{
    enum { R = 200, C = 300, BR = 128, BC = 128 };
    uint16_t *bf = malloc(R * C * 2);
    float *f = malloc(R * C * 4), sc[2 * 3], want_sc[2 * 3];
    uint8_t *q = malloc(R * C), *want = malloc(R * C);
    wsync_fp8_spec_t spec = {BR, BC, WSYNC_SCALE_FP32};
    int r, c, form, fmt, bad = 0;
    for (r = 0; r < R; r++)
        for (c = 0; c < C; c++) {
            /* a zero block (rows 128.., cols 128..255) and magnitudes over many binades */
            float v = (r >= 128 && c >= 128 && c < 256)
                          ? 0.0f
                          : ldexpf((float)rnd() / (1 << 24) - 0.5f, (int)(rnd() % 30) - 12);
            uint32_t b;
            memcpy(&b, &v, 4);
            bf[r * C + c] = (uint16_t)(b >> 16);
            b &= 0xffff0000u;
            memcpy(&f[r * C + c], &b, 4); /* the same values in fp32 */
        }
    for (form = 0; form < 2; form++)
        for (fmt = 0; fmt < 2; fmt++) {
            spec.form = (wsync_scale_form_t)form;
            CHECK_OK(wsync_fp8_quantize_host(fmt ? (void *)f : (void *)bf, fmt ? WSYNC_QSRC_F32 : WSYNC_QSRC_BF16,
                                             R, C, &spec, q, sc, "w"));
            for (r = 0; r < 2; r++)
                for (c = 0; c < 3; c++) {
                    float amax = 0, s;
                    int i, j;
                    for (i = r * BR; i < R && i < (r + 1) * BR; i++)
                        for (j = c * BC; j < C && j < (c + 1) * BC; j++)
                            amax = fmaxf(amax, fabsf(f[i * C + j]));
                    s = amax == 0 ? 1.0f : amax / 448.0f;
                    if (form == 1 && amax != 0) { /* the next power of two up, unless s is one */
                        int e;
                        if (frexpf(s, &e) != 0.5f)
                            s = ldexpf(1.0f, e);
                    }
                    want_sc[r * 3 + c] = s;
                    for (i = r * BR; i < R && i < (r + 1) * BR; i++)
                        for (j = c * BC; j < C && j < (c + 1) * BC; j++)
                            want[i * C + j] = nearest(f[i * C + j] / s);
                }
            bad += memcmp(sc, want_sc, sizeof(sc)) != 0;
            bad += memcmp(q, want, R * C) != 0;
        }
    CHECK_EQ(bad, 0);
    CHECK(want_sc[4] == 1.0f);
    CHECK_EQ(wsync_fp8_scale_rows(&spec, R), 2);
    CHECK_EQ(wsync_fp8_scale_cols(&spec, C), 3);
    free(bf), free(f), free(q), free(want);
}

static void nan_and_infinity_refused_naming_them(void)
{
    float m[4 * 5] = {0};
    uint8_t q[20];
    float sc[1];
    wsync_fp8_spec_t spec = {128, 128, WSYNC_SCALE_FP32};
    m[2 * 5 + 3] = NAN;
    CHECK_FAILS(wsync_fp8_quantize_host(m, WSYNC_QSRC_F32, 4, 5, &spec, q, sc, "layers.3.mlp.w"),
                WSYNC_ERR_INVALID, "'layers.3.mlp.w' holds NaN at row 2, column 3");
    m[2 * 5 + 3] = -INFINITY;
    CHECK_FAILS(wsync_fp8_quantize_host(m, WSYNC_QSRC_F32, 4, 5, &spec, q, sc, "x"), WSYNC_ERR_INVALID,
                "an infinity at row 2");
}

/* BF16 (the streamed path) names the NaN's row in the whole matrix, past
 * the first band. */
static void bf16_nan_named_past_the_first_band(void)
{
    enum { R = 200, C = 40 };
    uint16_t *m = calloc(R * C, 2);
    uint8_t *q = malloc(R * C);
    float sc[2];
    wsync_fp8_spec_t spec = {128, 128, WSYNC_SCALE_FP32};
    m[130 * C + 7] = 0x7fc0;
    CHECK_FAILS(wsync_fp8_quantize_host(m, WSYNC_QSRC_BF16, R, C, &spec, q, sc, "w"), WSYNC_ERR_INVALID,
                "'w' holds NaN at row 130, column 7");
    free(m);
    free(q);
}

/* A band cut into parts at arbitrary elements (as trainer ranks hold it):
 * each part's maxima, combined, then each part quantized with them, equal
 * the whole band quantized at once, BF16 and F32, both scale forms; a NaN
 * in a part is named by its row in the band and column. */
static void parts_with_every_parts_maxima_equal_the_whole_band(void)
{
    enum { R = 100, C = 300, N = R * C };
    uint16_t *bf = malloc(N * 2);
    float *f = malloc(N * 4), sc[3], psc[3];
    uint8_t *q = malloc(N), *pq = malloc(N);
    const uint64_t cut[] = {0, 1, 4999, 5000, 17777, 29999, N};
    wsync_fp8_spec_t spec = {128, 128, WSYNC_SCALE_FP32};
    int i, form, fmt;
    for (i = 0; i < N; i++) {
        float v = ldexpf((float)rnd() / (1 << 24) - 0.5f, (int)(rnd() % 40) - 20);
        uint32_t b;
        memcpy(&b, &v, 4);
        bf[i] = (uint16_t)(b >> 16);
        b &= 0xffff0000u;
        memcpy(&f[i], &b, 4);
    }
    for (form = 0; form < 2; form++)
        for (fmt = 0; fmt < 2; fmt++) {
            const void *src = fmt ? (const void *)f : (const void *)bf;
            const size_t es = fmt ? 4 : 2;
            float amax[3] = {0, 0, 0};
            size_t k;
            spec.form = (wsync_scale_form_t)form;
            CHECK_OK(wsync_fp8_quantize_host(src, (wsync_quant_src_t)fmt, R, C, &spec, q, sc, "w"));
            for (k = 0; k + 1 < sizeof(cut) / sizeof(cut[0]); k++)
                CHECK_OK(wsync_fp8_part_amax_host((const char *)src + cut[k] * es, (wsync_quant_src_t)fmt, cut[k],
                                                  cut[k + 1] - cut[k], C, &spec, amax, "w"));
            memset(pq, 0xaa, N);
            for (k = 0; k + 1 < sizeof(cut) / sizeof(cut[0]); k++)
                wsync_fp8_part_quantize_host((const char *)src + cut[k] * es, (wsync_quant_src_t)fmt, cut[k],
                                             cut[k + 1] - cut[k], C, &spec, amax, pq + cut[k], k == 0 ? psc : NULL);
            CHECK(memcmp(q, pq, N) == 0);
            CHECK(memcmp(sc, psc, sizeof(sc)) == 0);
        }
    bf[17777 + 3] = 0x7f80; /* +inf: row 59, column 80 of the band */
    {
        float amax[3] = {0, 0, 0};
        CHECK_FAILS(wsync_fp8_part_amax_host(bf + 17777, WSYNC_QSRC_BF16, 17777, 100, C, &spec, amax, "w"),
                    WSYNC_ERR_INVALID, "'w' holds an infinity at row 59, column 80");
    }
    free(bf);
    free(f);
    free(q);
    free(pq);
}

int main(void)
{
    RUN(every_code_decodes_to_its_value_and_back);
    RUN(encode_is_the_nearest_code_ties_to_even);
    RUN(gpu_quotient_gives_the_division_code);
    RUN(scales_fp32_ue8m0_and_zero);
    RUN(matrix_with_edge_blocks);
    RUN(nan_and_infinity_refused_naming_them);
    RUN(bf16_nan_named_past_the_first_band);
    RUN(parts_with_every_parts_maxima_equal_the_whole_band);
    TEST_EXIT();
}
