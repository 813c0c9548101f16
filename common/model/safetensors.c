/* safetensors.c: read (mmap + validation) and write (atomic) safetensors. */
#include "common/model/safetensors.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/checks.h"

typedef struct entry {
    const char *name;
    wsync_dtype_t dtype;
    int ndim;
    int64_t shape[WSYNC_MAX_DIMS];
    uint64_t begin, end;
} entry_t;

static int cmp_entry(const void *a, const void *b)
{
    const entry_t *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static wsync_status_t bad(const char *file, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static wsync_status_t bad(const char *file, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return wsync_error(WSYNC_ERR_FORMAT, "%s: %s", file, msg);
}

static wsync_status_t parse_entry(const char *file, const char *name, const json_t *e, uint64_t data_len,
                                  entry_t *out)
{
    const json_t *jd = json_object_get(e, "dtype"), *js = json_object_get(e, "shape");
    const json_t *jo = json_object_get(e, "data_offsets");
    uint64_t nelem = 1;
    int64_t need;
    size_t d;

    if (!json_is_object(e))
        return bad(file, "tensor '%s': entry is not an object", name);
    if (!json_is_string(jd))
        return bad(file, "tensor '%s': missing dtype", name);
    if (wsync_dtype_parse(json_string_value(jd), &out->dtype) != 0)
        return bad(file, "tensor '%s': unknown dtype '%s'", name, json_string_value(jd));
    if (!json_is_array(js))
        return bad(file, "tensor '%s': missing shape", name);
    if (json_array_size(js) > WSYNC_MAX_DIMS)
        return bad(file, "tensor '%s': %zu dimensions (wsync supports %d)", name, json_array_size(js),
                   WSYNC_MAX_DIMS);
    for (d = 0; d < json_array_size(js); d++) {
        const json_t *x = json_array_get(js, d);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return bad(file, "tensor '%s': shape[%zu] is not a non-negative integer", name, d);
        out->shape[d] = json_integer_value(x);
        if (out->shape[d] != 0 && nelem > (uint64_t)INT64_MAX / (uint64_t)out->shape[d])
            return bad(file, "tensor '%s': shape overflows", name);
        nelem *= (uint64_t)out->shape[d];
    }
    out->ndim = (int)json_array_size(js);
    if (jo == NULL)
        return bad(file, "tensor '%s': missing data_offsets", name);
    if (!json_is_array(jo) || json_array_size(jo) != 2 || !json_is_integer(json_array_get(jo, 0)) ||
        !json_is_integer(json_array_get(jo, 1)) || json_integer_value(json_array_get(jo, 0)) < 0 ||
        json_integer_value(json_array_get(jo, 1)) < json_integer_value(json_array_get(jo, 0)))
        return bad(file, "tensor '%s': data_offsets must be [begin, end] with 0 <= begin <= end", name);
    out->begin = (uint64_t)json_integer_value(json_array_get(jo, 0));
    out->end = (uint64_t)json_integer_value(json_array_get(jo, 1));
    if (out->end > data_len)
        return bad(file,
                   "tensor '%s': data_offsets [%llu, %llu] run past the data section (%llu bytes); "
                   "the file may be truncated",
                   name, (unsigned long long)out->begin, (unsigned long long)out->end, (unsigned long long)data_len);
    need = wsync_dtype_nbytes(out->dtype, nelem);
    if (need < 0)
        return bad(file, "tensor '%s': %llu %s elements do not fill whole bytes (or overflow)", name,
                   (unsigned long long)nelem, json_string_value(jd));
    if ((uint64_t)need != out->end - out->begin) {
        char shape[160];
        int n = snprintf(shape, sizeof(shape), "[");
        for (d = 0; d < (size_t)out->ndim && n < (int)sizeof(shape) - 24; d++)
            n += snprintf(shape + n, sizeof(shape) - (size_t)n, "%s%lld", d ? ", " : "", (long long)out->shape[d]);
        snprintf(shape + n, sizeof(shape) - (size_t)n, "]");
        return bad(file, "tensor '%s': shape %s x %s needs %lld bytes but data_offsets cover %llu", name, shape,
                   json_string_value(jd), (long long)need, (unsigned long long)(out->end - out->begin));
    }
    out->name = name;
    return WSYNC_OK;
}

wsync_status_t wsync_safetensors_parse(const void *buf, size_t len, const char *file, wsync_safetensors_t **out)
{
    const unsigned char *p = buf;
    wsync_safetensors_t *st = NULL;
    entry_t *ents = NULL;
    json_t *hdr = NULL, *meta = NULL, *v;
    json_error_t jerr;
    uint64_t hlen = 0, data_len, pos = 0;
    const char *key;
    size_t n = 0, i;
    wsync_status_t rc;
    int b;

    if (len < 8)
        return bad(file, "file is %zu bytes, shorter than the 8-byte header length: not a safetensors file", len);
    for (b = 7; b >= 0; b--)
        hlen = hlen << 8 | p[b];
    if (hlen > WSYNC_ST_MAX_HEADER)
        return bad(file, "header length %llu is absurd (limit %u bytes): not a safetensors file or corrupt",
                   (unsigned long long)hlen, WSYNC_ST_MAX_HEADER);
    if (hlen > len - 8)
        return bad(file, "header length %llu runs past the end of the file (%zu bytes): truncated?",
                   (unsigned long long)hlen, len);
    hdr = json_loadb((const char *)p + 8, hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (hdr == NULL)
        return bad(file, "header is not valid JSON: %s (column %d)%s", jerr.text, jerr.column,
                   strstr(jerr.text, "duplicate") ? " (duplicate tensor name)" : "");
    if (!json_is_object(hdr)) {
        json_decref(hdr);
        return bad(file, "header is not a JSON object");
    }
    data_len = len - 8 - hlen;
    ents = calloc(json_object_size(hdr) + 1, sizeof(*ents));
    if (ents == NULL) {
        json_decref(hdr);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    json_object_foreach(hdr, key, v)
    {
        if (strcmp(key, "__metadata__") == 0) {
            const char *mk;
            json_t *mv;
            if (!json_is_object(v)) {
                rc = bad(file, "__metadata__ must be an object of strings");
                goto err;
            }
            json_object_foreach(v, mk, mv) if (!json_is_string(mv))
            {
                rc = bad(file, "__metadata__ value '%s' is not a string", mk);
                goto err;
            }
            meta = v;
            continue;
        }
        WSYNC_CHECK_GOTO(parse_entry(file, key, v, data_len, &ents[n]), rc, err);
        n++;
    }
    qsort(ents, n, sizeof(*ents), cmp_entry);
    for (i = 0; i < n; i++) {
        if (ents[i].begin < pos) {
            rc = bad(file, "tensor '%s' (bytes %llu..%llu) overlaps tensor '%s'", ents[i].name,
                     (unsigned long long)ents[i].begin, (unsigned long long)ents[i].end, ents[i - 1].name);
            goto err;
        }
        if (ents[i].begin > pos) {
            rc = bad(file, "a hole of %llu bytes before tensor '%s': the data section must be covered exactly",
                     (unsigned long long)(ents[i].begin - pos), ents[i].name);
            goto err;
        }
        pos = ents[i].end;
    }
    if (pos != data_len) {
        rc = bad(file, "%llu bytes after the last tensor are not covered by any tensor",
                 (unsigned long long)(data_len - pos));
        goto err;
    }
    st = calloc(1, sizeof(*st));
    if (st == NULL || (st->data = calloc(n + 1, sizeof(*st->data))) == NULL) {
        rc = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        goto err;
    }
    st->path = strdup(file);
    if (st->path == NULL) {
        rc = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        goto err;
    }
    st->base = p;
    st->len = len;
    WSYNC_CHECK_GOTO(wsync_manifest_create(&st->manifest), rc, err);
    for (i = 0; i < n; i++) {
        if (wsync_manifest_add(st->manifest, ents[i].name, ents[i].dtype, ents[i].ndim, ents[i].shape) != WSYNC_OK) {
            rc = bad(file, "tensor '%s': %s", ents[i].name, wsync_last_error());
            goto err;
        }
        st->data[i] = p + 8 + hlen + ents[i].begin;
    }
    if (meta)
        st->manifest->metadata = json_deep_copy(meta);
    free(ents);
    json_decref(hdr);
    *out = st;
    return WSYNC_OK;
err:
    wsync_safetensors_close(st);
    free(ents);
    json_decref(hdr);
    return rc;
}

wsync_status_t wsync_safetensors_open(const char *path, wsync_safetensors_t **out)
{
    struct stat sb;
    void *map = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    wsync_status_t st;
    if (fd < 0)
        return wsync_error(WSYNC_ERR_IO, "%s: %s", path, strerror(errno));
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return wsync_error(WSYNC_ERR_IO, "%s: not a regular file", path);
    }
    if (sb.st_size > 0) {
        map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return wsync_error(WSYNC_ERR_IO, "%s: cannot map: %s", path, strerror(e));
        }
    }
    close(fd);
    st = wsync_safetensors_parse(map ? map : "", (size_t)sb.st_size, path, out);
    if (st != WSYNC_OK) {
        if (map)
            munmap(map, (size_t)sb.st_size);
        return st;
    }
    (*out)->mapped = map != NULL;
    return WSYNC_OK;
}

void wsync_safetensors_close(wsync_safetensors_t *st)
{
    if (st == NULL)
        return;
    if (st->mapped)
        munmap((void *)st->base, st->len);
    wsync_manifest_free(st->manifest);
    free(st->data);
    free(st->path);
    free(st);
}

wsync_status_t wsync_safetensors_copy_to_image(const wsync_safetensors_t *st, void *image)
{
    const wsync_manifest_t *m = st->manifest;
    uint64_t pos = 0;
    size_t i;
    for (i = 0; i < m->ntensors; i++) {
        const wsync_tensor_t *t = &m->tensors[i];
        memset((char *)image + pos, 0, t->offset - pos);
        memcpy((char *)image + t->offset, st->data[i], t->size);
        pos = t->offset + t->size;
    }
    memset((char *)image + pos, 0, m->image_size - pos);
    return WSYNC_OK;
}

static wsync_status_t write_all(int fd, const void *buf, size_t len, const char *path)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return wsync_error(WSYNC_ERR_IO, "%s: write failed: %s", path, n < 0 ? strerror(errno) : "no progress");
        p += n;
        len -= (size_t)n;
    }
    return WSYNC_OK;
}

/* fsync the directory holding `path`, so a rename survives a crash. Best
 * effort: some file systems refuse fsync on directories. */
static void sync_parent_dir(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    int fd;
    if (slash == NULL)
        snprintf(dir, sizeof(dir), ".");
    else
        snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* The header text of `m` with `metadata`, padded with spaces to a multiple of
 * 8 as the reference writer does (so the data section starts aligned). */
static wsync_status_t build_header(const char *path, const wsync_manifest_t *m, const json_t *metadata,
                                   char **text_p, size_t *tl_p, uint64_t *hlen_p)
{
    json_t *hdr = json_object();
    uint64_t off = 0;
    size_t i;
    int d;
    char *text;

    WSYNC_CHECK_ALLOC(hdr);
    if (metadata && json_object_size(metadata))
        json_object_set(hdr, "__metadata__", (json_t *)metadata);
    for (i = 0; i < m->ntensors; i++) {
        const wsync_tensor_t *t = &m->tensors[i];
        json_t *shape = json_array(), *e;
        for (d = 0; d < t->ndim; d++)
            json_array_append_new(shape, json_integer(t->shape[d]));
        e = json_pack("{s:s, s:o, s:[I, I]}", "dtype", wsync_dtype_name(t->dtype), "shape", shape, "data_offsets",
                      (json_int_t)off, (json_int_t)(off + t->size));
        if (e == NULL || strcmp(t->name, "__metadata__") == 0 || json_object_set_new(hdr, t->name, e) != 0) {
            json_decref(hdr);
            return wsync_error(WSYNC_ERR_INVALID,
                               "%s: cannot write tensor '%s': its name is reserved or not "
                               "UTF-8, or memory ran out",
                               path, t->name);
        }
        off += t->size;
    }
    text = json_dumps(hdr, JSON_COMPACT);
    json_decref(hdr);
    WSYNC_CHECK_ALLOC(text);
    *text_p = text;
    *tl_p = strlen(text);
    *hlen_p = (*tl_p + 7) / 8 * 8;
    return WSYNC_OK;
}

wsync_status_t wsync_safetensors_write(const char *path, const wsync_manifest_t *m, const void *image,
                                       const json_t *metadata)
{
    char tmp[4096], *text = NULL;
    uint64_t hlen = 0;
    unsigned char lenbuf[8];
    size_t i, tl = 0;
    wsync_status_t st = WSYNC_OK;
    int fd, b;

    if (metadata) {
        const char *k;
        json_t *v;
        if (!json_is_object(metadata))
            return wsync_error(WSYNC_ERR_INVALID, "%s: __metadata__ must be an object of strings", path);
        json_object_foreach((json_t *)metadata, k,
                            v) if (!json_is_string(v)) return wsync_error(WSYNC_ERR_INVALID,
                                                                          "%s: __metadata__ value '%s' is not a "
                                                                          "string",
                                                                          path, k);
    }
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path) >= sizeof(tmp))
        return wsync_error(WSYNC_ERR_INVALID, "%s: path too long", path);
    WSYNC_CHECK(build_header(path, m, metadata, &text, &tl, &hlen));
    for (b = 0; b < 8; b++)
        lenbuf[b] = (unsigned char)(hlen >> (8 * b));
    /* A unique temp file next to the target: rename is atomic only within one
     * file system, and two writers of one path must not share a temp file. */
    fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        st = wsync_error(WSYNC_ERR_IO, "%s: cannot create a temp file in its directory: %s", path, strerror(errno));
        free(text);
        return st;
    }
    if (fchmod(fd, 0644) != 0)
        WSYNC_CHECK_GOTO(wsync_error(WSYNC_ERR_IO, "%s: chmod: %s", tmp, strerror(errno)), st, out);
    WSYNC_CHECK_GOTO(write_all(fd, lenbuf, 8, path), st, out);
    WSYNC_CHECK_GOTO(write_all(fd, text, tl, path), st, out);
    WSYNC_CHECK_GOTO(write_all(fd, "        ", hlen - tl, path), st, out);
    for (i = 0; i < m->ntensors; i++)
        WSYNC_CHECK_GOTO(write_all(fd, (const char *)image + m->tensors[i].offset, m->tensors[i].size, path), st,
                         out);
    if (fsync(fd) != 0)
        st = wsync_error(WSYNC_ERR_IO, "%s: fsync: %s", path, strerror(errno));
out:
    free(text);
    if (close(fd) != 0 && st == WSYNC_OK)
        st = wsync_error(WSYNC_ERR_IO, "%s: close: %s", path, strerror(errno));
    if (st == WSYNC_OK && rename(tmp, path) != 0)
        st = wsync_error(WSYNC_ERR_IO, "%s: rename from %s: %s", path, tmp, strerror(errno));
    if (st != WSYNC_OK)
        unlink(tmp);
    else
        sync_parent_dir(path);
    return st;
}

wsync_status_t wsync_safetensors_write_tensors(const char *path, size_t n, const wsync_st_tensor_t *tensors,
                                               const json_t *metadata)
{
    wsync_manifest_t *m = NULL;
    unsigned char *image = NULL;
    wsync_status_t st;
    size_t i;

    WSYNC_CHECK(wsync_manifest_create(&m));
    for (i = 0; i < n; i++)
        WSYNC_CHECK_GOTO(wsync_manifest_add(m, tensors[i].name, tensors[i].dtype, tensors[i].ndim, tensors[i].shape),
                         st, out);
    image = calloc(1, m->image_size ? m->image_size : 1);
    if (image == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "%s: out of memory for a %llu-byte image", path,
                         (unsigned long long)m->image_size);
        goto out;
    }
    for (i = 0; i < n; i++)
        if (m->tensors[i].size)
            memcpy(image + m->tensors[i].offset, tensors[i].data, m->tensors[i].size);
    st = wsync_safetensors_write(path, m, image, metadata);
out:
    free(image);
    wsync_manifest_free(m);
    return st;
}
