/* safetensors.h: the safetensors file format: a reader that maps the file
 * (never copies it whole) and refuses malformed files with a message naming
 * the file, the tensor and the problem, and an atomic writer. */
#ifndef WSYNC_COMMON_SAFETENSORS_H
#define WSYNC_COMMON_SAFETENSORS_H

#include <jansson.h>

#include "common/model/manifest.h"

#define WSYNC_ST_MAX_HEADER (100u << 20)

typedef struct wsync_safetensors {
    char *path;
    const unsigned char *base; /* whole file (mapped) or the caller's buffer */
    size_t len;
    int mapped;
    wsync_manifest_t *manifest; /* image layout: file order, each tensor aligned to 256 */
    const unsigned char **data; /* [ntensors]: each tensor's bytes in the file */
} wsync_safetensors_t;

/* Map and validate `path`. */
wsync_status_t wsync_safetensors_open(const char *path, wsync_safetensors_t **out);
/* Validate a file already in memory (`name` labels messages); the buffer
 * must outlive the result. */
wsync_status_t wsync_safetensors_parse(const void *buf, size_t len, const char *name, wsync_safetensors_t **out);
void wsync_safetensors_close(wsync_safetensors_t *st);

/* Copy every tensor to its image offset in `image` (manifest->image_size
 * bytes); padding becomes zeros. */
wsync_status_t wsync_safetensors_copy_to_image(const wsync_safetensors_t *st, void *image);

/* Write the tensors of `m` found in `image` as a safetensors file, with
 * `metadata` (object of strings, may be NULL) as __metadata__. Atomic: a temp
 * file in the same directory, fsync, rename; on failure no file is left. */
wsync_status_t wsync_safetensors_write(const char *path, const wsync_manifest_t *m, const void *image,
                                       const json_t *metadata);

/* One tensor for wsync_safetensors_write_tensors: `data` holds exactly
 * shape x dtype bytes. */
typedef struct wsync_st_tensor {
    const char *name;
    wsync_dtype_t dtype;
    int ndim;
    const int64_t *shape;
    const void *data;
} wsync_st_tensor_t;

/* Write `n` tensors, in this order, as a safetensors file (same atomic
 * writer); for tests and tools that hold tensors in separate buffers. */
wsync_status_t wsync_safetensors_write_tensors(const char *path, size_t n, const wsync_st_tensor_t *tensors,
                                               const json_t *metadata);

#endif
