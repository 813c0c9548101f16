/* quant.c: block FP8 quantization on the host (quant.h, docs/FP8.md). */
#include "common/quant/quant.h"

#include <math.h>
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

wsync_status_t wsync_fp8_quantize_host(const void *src, wsync_quant_src_t fmt, uint64_t rows, uint64_t cols,
                                       const wsync_fp8_spec_t *spec, uint8_t *q, float *scale, const char *what)
{
    const uint64_t br = (uint64_t)spec->block_rows, bc = (uint64_t)spec->block_cols;
    const uint64_t scols = wsync_fp8_scale_cols(spec, cols);
    uint64_t r0, c0, r, c;

    if (spec->block_rows < 1 || spec->block_cols < 1 || (fmt != WSYNC_QSRC_BF16 && fmt != WSYNC_QSRC_F32))
        return wsync_error(WSYNC_ERR_INVALID,
                           "fp8: tensor '%s': blocks of %d x %d of source format %d: need blocks "
                           "of at least 1 x 1 of bf16 or fp32",
                           what, spec->block_rows, spec->block_cols, (int)fmt);
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
                                           what, isnan(a) ? "NaN" : "an infinity", (unsigned long long)r,
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

wsync_status_t wsync_fp8_part_amax_host(const void *src, wsync_quant_src_t fmt, uint64_t e0, uint64_t n,
                                        uint64_t cols, const wsync_fp8_spec_t *spec, float *amax, const char *what)
{
    const uint64_t bc = (uint64_t)spec->block_cols;
    uint64_t i;
    for (i = 0; i < n; i++) {
        const uint64_t c = (e0 + i) % cols;
        const float a = fabsf(load(src, fmt, i));
        if (!isfinite(a))
            return wsync_error(WSYNC_ERR_INVALID,
                               "fp8: tensor '%s' holds %s at row %llu, column %llu: FP8 cannot carry it; find "
                               "where the trainer produced it",
                               what, isnan(a) ? "NaN" : "an infinity", (unsigned long long)((e0 + i) / cols),
                               (unsigned long long)c);
        if (a > amax[c / bc])
            amax[c / bc] = a;
    }
    return WSYNC_OK;
}

void wsync_fp8_part_quantize_host(const void *src, wsync_quant_src_t fmt, uint64_t e0, uint64_t n, uint64_t cols,
                                  const wsync_fp8_spec_t *spec, const float *amax, uint8_t *q, float *scale)
{
    const uint64_t bc = (uint64_t)spec->block_cols, scols = wsync_fp8_scale_cols(spec, cols);
    uint64_t i, c, j;
    for (c = 0; scale != NULL && c < scols; c++)
        scale[c] = wsync_fp8_scale(amax[c], spec->form);
    for (i = 0; i < n; i += j) { /* one stretch of a row inside one block column at a time */
        const uint64_t col = (e0 + i) % cols, left = n - i;
        const uint64_t run = bc - col % bc < cols - col ? bc - col % bc : cols - col;
        const float sk = wsync_fp8_scale(amax[col / bc], spec->form);
        for (j = 0; j < run && j < left; j++)
            q[i + j] = wsync_fp8_e4m3_encode(load(src, fmt, i + j) / sk);
    }
}
