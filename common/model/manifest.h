/* manifest.h: the layout of an image: its tensors in order, each aligned to
 * WSYNC_ALIGN bytes, with names, dtypes and shapes. Pure data plus JSON. */
#ifndef WSYNC_COMMON_MANIFEST_H
#define WSYNC_COMMON_MANIFEST_H

#include <jansson.h>
#include <stdint.h>

#include "common/wsync.h"

#define WSYNC_ALIGN 256

/* Every dtype the safetensors format defines. Sub-byte types (F4, F6_*) pack
 * elements; see wsync_dtype_nbytes. */
typedef enum wsync_dtype {
    WSYNC_DTYPE_BOOL,
    WSYNC_DTYPE_F4,
    WSYNC_DTYPE_F6_E2M3,
    WSYNC_DTYPE_F6_E3M2,
    WSYNC_DTYPE_U8,
    WSYNC_DTYPE_I8,
    WSYNC_DTYPE_F8_E5M2,
    WSYNC_DTYPE_F8_E4M3,
    WSYNC_DTYPE_F8_E8M0,
    WSYNC_DTYPE_I16,
    WSYNC_DTYPE_U16,
    WSYNC_DTYPE_F16,
    WSYNC_DTYPE_BF16,
    WSYNC_DTYPE_I32,
    WSYNC_DTYPE_U32,
    WSYNC_DTYPE_F32,
    WSYNC_DTYPE_F64,
    WSYNC_DTYPE_I64,
    WSYNC_DTYPE_U64,
    WSYNC_DTYPE_C64,
    WSYNC_DTYPE_COUNT
} wsync_dtype_t;

/* "BF16" etc.; NULL for an out-of-range value. */
const char *wsync_dtype_name(wsync_dtype_t dtype);
/* 0 and *out set when `name` is a known dtype, -1 otherwise. */
int wsync_dtype_parse(const char *name, wsync_dtype_t *out);
/* Bits per element (4 for F4, 16 for BF16, ...). */
unsigned wsync_dtype_bits(wsync_dtype_t dtype);
/* Bytes taken by `nelem` elements, or -1 if that overflows or the count does
 * not pack into whole bytes. */
int64_t wsync_dtype_nbytes(wsync_dtype_t dtype, uint64_t nelem);

typedef struct wsync_tensor {
    char *name;
    wsync_dtype_t dtype;
    int ndim; /* 0 for a scalar */
    int64_t shape[WSYNC_MAX_DIMS];
    uint64_t offset; /* in the image; multiple of WSYNC_ALIGN */
    uint64_t size;   /* bytes of data (no padding) */
} wsync_tensor_t;

typedef struct wsync_manifest {
    size_t ntensors;
    wsync_tensor_t *tensors; /* image order */
    uint64_t image_size;     /* end of the last tensor, padded to WSYNC_ALIGN */
    json_t *metadata;        /* safetensors __metadata__ (object of strings) or NULL; owned */
    json_t *by_name_;        /* private to manifest.c: name -> index, so add/find stay O(1)
                                     * on models of 100k tensors */
} wsync_manifest_t;

/* Empty manifest. Destroy with wsync_manifest_free (NULL is fine). */
wsync_status_t wsync_manifest_create(wsync_manifest_t **out);
void wsync_manifest_free(wsync_manifest_t *m);

/* Append a tensor at the next aligned offset; copies `name`. Fails on a
 * duplicate name, a bad shape, or a size that overflows. */
wsync_status_t wsync_manifest_add(wsync_manifest_t *m, const char *name, wsync_dtype_t dtype, int ndim,
                                  const int64_t *shape);

/* Index of the tensor named `name`, or -1. Constant time. */
long wsync_manifest_find(const wsync_manifest_t *m, const char *name);

/* JSON form: {"version":1,"align":256,"image_size":N,"tensors":[{"name","dtype",
 * "shape","offset","size"}...],"metadata":{...}}. to_json returns a new
 * reference; from_json validates everything (alignment, order, sizes,
 * duplicates) and names the offending tensor in the error. */
wsync_status_t wsync_manifest_to_json(const wsync_manifest_t *m, json_t **out);
wsync_status_t wsync_manifest_from_json(const json_t *j, wsync_manifest_t **out);

/* Canonical digest of the layout (names, dtypes, shapes, offsets, sizes,
 * image size; not metadata), as 32 hex digits: equal layouts, equal digests. */
void wsync_manifest_digest(const wsync_manifest_t *m, char out[33]);

/* The tensors that bytes [off, end) of the image touch, for an error
 * message: "tensor 'a'" or "tensors 'a' to 'b' (N)", or "no tensor" (padding
 * only). Always NUL-terminates `out`. */
void wsync_manifest_describe_range(const wsync_manifest_t *m, uint64_t off, uint64_t end, char *out, size_t len);

/* A synthetic model of about `bytes` bytes (within 10%, from 1 MiB to 64 GiB
 * and beyond) shaped like a small LLM (embedding, per-layer attention and MLP
 * matrices, norms, lm_head), in BF16: hidden size, layer count and vocabulary
 * grow with the budget the way real models' do. Deterministic. */
wsync_status_t wsync_manifest_synthetic(uint64_t bytes, wsync_manifest_t **out);

#endif
