/* quant.c: block FP8 quantization on the host (quant.h, docs/FP8.md). */
#include "common/quant/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/quant/quant_math.h"

static const char *const form_names[] = {[WSYNC_SCALE_FP32] = "fp32", [WSYNC_SCALE_UE8M0] = "ue8m0"};

const char *wsync_scale_form_name(wsync_scale_form_t f)
{
    return (unsigned)f < WSYNC_ARRAY_LEN(form_names) ? form_names[f] : "?";
}

int wsync_scale_form_parse(const char *name, wsync_scale_form_t *out)
{
    size_t i;
    for (i = 0; name && i < WSYNC_ARRAY_LEN(form_names); i++)
        if (strcmp(name, form_names[i]) == 0) {
            *out = (wsync_scale_form_t)i;
            return 0;
        }
    return -1;
}

uint8_t wsync_fp8_e4m3_encode(float x)
{
    return qm_encode(x);
}

float wsync_fp8_e4m3_decode(uint8_t b)
{
    int e = (b >> 3) & 0xf, m = b & 7;
    float v;
    if ((b & 0x7f) == 0x7f)
        return NAN;
    v = e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), e - 10);
    return b & 0x80 ? -v : v;
}

float wsync_fp8_scale(float amax, wsync_scale_form_t form)
{
    return qm_scale(amax, form == WSYNC_SCALE_UE8M0);
}

uint64_t wsync_fp8_scale_rows(const wsync_fp8_spec_t *s, uint64_t rows)
{
    return (rows + (uint64_t)s->block_rows - 1) / (uint64_t)s->block_rows;
}

uint64_t wsync_fp8_scale_cols(const wsync_fp8_spec_t *s, uint64_t cols)
{
    return (cols + (uint64_t)s->block_cols - 1) / (uint64_t)s->block_cols;
}

static inline float load(const void *src, wsync_quant_src_t fmt, uint64_t i)
{
    if (fmt == WSYNC_QSRC_BF16)
        return qm_bf16(((const uint16_t *)src)[i]);
    return ((const float *)src)[i];
}

#if defined(__GNUC__) && !defined(__clang__)
#define QUANT_VECTORIZE __attribute__((optimize("vect-cost-model=dynamic"))) /* -O2's model vectorizes neither */
#else
#define QUANT_VECTORIZE
#endif

/* The streamed BF16 loops: n values of one stretch of a row inside one
 * block column, no branch, so the compiler vectorizes them. max_bits: m
 * raised to the largest magnitude's bits (BF16 magnitudes order as their
 * bits; NaN and infinities sort above 0x7f7f, every finite value). codes:
 * their e4m3fn codes with scale s. */
static QUANT_VECTORIZE uint16_t max_bits(const uint16_t *restrict x, uint64_t n, uint16_t m)
{
    uint64_t c;
    for (c = 0; c < n; c++) {
        const uint16_t a = x[c] & 0x7fffu;
        m = a > m ? a : m;
    }
    return m;
}

static QUANT_VECTORIZE void codes(const uint16_t *restrict x, uint64_t n, float s, uint8_t *restrict o)
{
    uint64_t c;
    for (c = 0; c < n; c++) {
        const float y = qm_bf16(x[c]) / s;
        o[c] = (uint8_t)(((x[c] >> 8) & 0x80u) | (qm_encode_mag_lo(fabsf(y)) & 0xffu));
    }
}

#define NOT_FINITE 0x7f7fu /* above: a NaN or an infinity */

/* BF16, the common case, a band (up to br rows) at a time in two streamed
 * passes over its rows: the maxima, then the codes. 0 when the band holds a
 * NaN or an infinity (the caller finds and names it). mx: scratch of scols. */
static int band_bf16(const uint16_t *src, uint64_t rows, uint64_t cols, const wsync_fp8_spec_t *spec, uint8_t *q,
                     float *scale, uint16_t *mx)
{
    const uint64_t bc = (uint64_t)spec->block_cols, scols = wsync_fp8_scale_cols(spec, cols);
    uint64_t r, c0, k;
    memset(mx, 0, scols * sizeof(*mx));
    for (r = 0; r < rows; r++)
        for (c0 = 0, k = 0; c0 < cols; c0 += bc, k++)
            mx[k] = max_bits(src + r * cols + c0, (c0 + bc < cols ? bc : cols - c0), mx[k]);
    for (k = 0; k < scols; k++) {
        if (mx[k] > NOT_FINITE)
            return 0;
        scale[k] = qm_scale(qm_bf16(mx[k]), spec->form == WSYNC_SCALE_UE8M0);
    }
    for (r = 0; r < rows; r++)
        for (c0 = 0, k = 0; c0 < cols; c0 += bc, k++)
            codes(src + r * cols + c0, (c0 + bc < cols ? bc : cols - c0), scale[k], q + r * cols + c0);
    return 1;
}

/* Any format, block by block: the reference form, and where a band holds a
 * NaN or an infinity, the one that finds it. */
static wsync_status_t blocks_any(const void *src, wsync_quant_src_t fmt, uint64_t rows, uint64_t cols,
                                 const wsync_fp8_spec_t *spec, uint8_t *q, float *scale, const char *what,
                                 uint64_t row0)
{
    const uint64_t br = (uint64_t)spec->block_rows, bc = (uint64_t)spec->block_cols;
    const uint64_t scols = wsync_fp8_scale_cols(spec, cols);
    uint64_t r0, c0, r, c;
    for (r0 = 0; r0 < rows; r0 += br) {
        const uint64_t r1 = r0 + br < rows ? r0 + br : rows;
        for (c0 = 0; c0 < cols; c0 += bc) {
            const uint64_t c1 = c0 + bc < cols ? c0 + bc : cols;
            float amax = 0.0f, s;
            for (r = r0; r < r1; r++)
                for (c = c0; c < c1; c++) {
                    float a = fabsf(load(src, fmt, r * cols + c));
                    if (!isfinite(a))
                        return wsync_error(WSYNC_ERR_INVALID,
                                           "fp8: tensor '%s' holds %s at row %llu, column %llu: FP8 cannot carry "
                                           "it; find where the trainer produced it",
                                           what, isnan(a) ? "NaN" : "an infinity", (unsigned long long)(row0 + r),
                                           (unsigned long long)c);
                    amax = a > amax ? a : amax;
                }
            s = wsync_fp8_scale(amax, spec->form);
            scale[(r0 / br) * scols + c0 / bc] = s;
            for (r = r0; r < r1; r++)
                for (c = c0; c < c1; c++)
                    q[r * cols + c] = wsync_fp8_e4m3_encode(load(src, fmt, r * cols + c) / s);
        }
    }
    return WSYNC_OK;
}

wsync_status_t wsync_fp8_quantize_host(const void *src, wsync_quant_src_t fmt, uint64_t rows, uint64_t cols,
                                       const wsync_fp8_spec_t *spec, uint8_t *q, float *scale, const char *what)
{
    const uint64_t br = (uint64_t)spec->block_rows, scols = wsync_fp8_scale_cols(spec, cols);
    uint16_t *mx;
    uint64_t r0;
    wsync_status_t st = WSYNC_OK;
    if (spec->block_rows < 1 || spec->block_cols < 1 || (fmt != WSYNC_QSRC_BF16 && fmt != WSYNC_QSRC_F32))
        return wsync_error(WSYNC_ERR_INVALID,
                           "fp8: tensor '%s': blocks of %d x %d of source format %d: need blocks "
                           "of at least 1 x 1 of bf16 or fp32",
                           what, spec->block_rows, spec->block_cols, (int)fmt);
    if (fmt != WSYNC_QSRC_BF16 || (mx = malloc((scols + 1) * sizeof(*mx))) == NULL)
        return blocks_any(src, fmt, rows, cols, spec, q, scale, what, 0);
    for (r0 = 0; r0 < rows && st == WSYNC_OK; r0 += br) {
        const uint64_t n = r0 + br < rows ? br : rows - r0;
        const uint16_t *x = (const uint16_t *)src + r0 * cols;
        if (!band_bf16(x, n, cols, spec, q + r0 * cols, scale + (r0 / br) * scols, mx))
            st = blocks_any(x, fmt, n, cols, spec, q + r0 * cols, scale + (r0 / br) * scols, what, r0);
    }
    free(mx);
    return st;
}

/* The stretches of a band's part [e0, e0 + n): each inside one row and one
 * block column, *run values from element i of the part, in column col. */
static uint64_t stretch(uint64_t e0, uint64_t i, uint64_t n, uint64_t cols, uint64_t bc, uint64_t *col)
{
    const uint64_t c = (e0 + i) % cols, run = bc - c % bc < cols - c ? bc - c % bc : cols - c;
    *col = c;
    return run < n - i ? run : n - i;
}

wsync_status_t wsync_fp8_part_amax_host(const void *src, wsync_quant_src_t fmt, uint64_t e0, uint64_t n,
                                        uint64_t cols, const wsync_fp8_spec_t *spec, float *amax, const char *what)
{
    const uint64_t bc = (uint64_t)spec->block_cols;
    uint64_t i, j, run, c;
    for (i = 0; i < n; i += run) {
        run = stretch(e0, i, n, cols, bc, &c);
        if (fmt == WSYNC_QSRC_BF16) { /* streamed; a stretch holding a NaN is looked at value by value */
            const uint16_t m = max_bits((const uint16_t *)src + i, run, 0);
            if (m <= NOT_FINITE) {
                amax[c / bc] = qm_bf16(m) > amax[c / bc] ? qm_bf16(m) : amax[c / bc];
                continue;
            }
        }
        for (j = 0; j < run; j++) {
            const float a = fabsf(load(src, fmt, i + j));
            if (!isfinite(a))
                return wsync_error(WSYNC_ERR_INVALID,
                                   "fp8: tensor '%s' holds %s at row %llu, column %llu: FP8 cannot carry it; find "
                                   "where the trainer produced it",
                                   what, isnan(a) ? "NaN" : "an infinity", (unsigned long long)((e0 + i) / cols),
                                   (unsigned long long)(c + j));
            amax[c / bc] = a > amax[c / bc] ? a : amax[c / bc];
        }
    }
    return WSYNC_OK;
}

void wsync_fp8_part_quantize_host(const void *src, wsync_quant_src_t fmt, uint64_t e0, uint64_t n, uint64_t cols,
                                  const wsync_fp8_spec_t *spec, const float *amax, uint8_t *q, float *scale)
{
    const uint64_t bc = (uint64_t)spec->block_cols, scols = wsync_fp8_scale_cols(spec, cols);
    uint64_t i, j, run, c;
    for (c = 0; scale != NULL && c < scols; c++)
        scale[c] = wsync_fp8_scale(amax[c], spec->form);
    for (i = 0; i < n; i += run) {
        float sk;
        run = stretch(e0, i, n, cols, bc, &c);
        sk = wsync_fp8_scale(amax[c / bc], spec->form);
        if (fmt == WSYNC_QSRC_BF16) {
            codes((const uint16_t *)src + i, run, sk, q + i);
            continue;
        }
        for (j = 0; j < run; j++)
            q[i + j] = wsync_fp8_e4m3_encode(load(src, fmt, i + j) / sk);
    }
}
