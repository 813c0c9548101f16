/* model.c: the stand-ins' model: synthetic or safetensors files in turn. */
#include "common/digest/digest.h"
#include "cli/model.h"

#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/util.h"

wsync_status_t cli_model_open(const char *synthetic, const char *files, cli_model_t *out)
{
    memset(out, 0, sizeof(*out));
    if (synthetic) {
        uint64_t size;
        WSYNC_CHECK(wsync_parse_size(synthetic, "--synthetic", &size));
        return wsync_manifest_synthetic(size, &out->manifest);
    } else {
        char *list = strdup(files), *save = NULL, *tok;
        char d1[33], d2[33];
        wsync_status_t st = WSYNC_OK;
        WSYNC_CHECK_ALLOC(list);
        for (tok = strtok_r(list, ",", &save); tok && st == WSYNC_OK; tok = strtok_r(NULL, ",", &save)) {
            wsync_safetensors_t **nf = realloc(out->files, (size_t)(out->nfiles + 1) * sizeof(*nf));
            if (nf == NULL) {
                st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
                break;
            }
            out->files = nf;
            st = wsync_safetensors_open(tok, &out->files[out->nfiles]);
            if (st != WSYNC_OK)
                break;
            out->nfiles++;
            wsync_manifest_digest(out->files[0]->manifest, d1);
            wsync_manifest_digest(out->files[out->nfiles - 1]->manifest, d2);
            if (strcmp(d1, d2) != 0)
                st = wsync_error(WSYNC_ERR_CONFLICT,
                                 "%s: its tensors (names, dtypes or shapes) differ from %s's; "
                                 "every file must hold the same model layout",
                                 tok, out->files[0]->path);
        }
        free(list);
        if (st == WSYNC_OK && out->nfiles == 0)
            st = wsync_error(WSYNC_ERR_INVALID, "--safetensors: no file given");
        if (st != WSYNC_OK) {
            cli_model_close(out);
            return st;
        }
        /* The image layout and metadata come from the first file. */
        {
            json_t *j = NULL;
            WSYNC_CHECK(wsync_manifest_to_json(out->files[0]->manifest, &j));
            st = wsync_manifest_from_json(j, &out->manifest);
            json_decref(j);
        }
        return st;
    }
}

void cli_model_close(cli_model_t *m)
{
    int i;
    for (i = 0; i < m->nfiles; i++)
        wsync_safetensors_close(m->files[i]);
    free(m->files);
    wsync_manifest_free(m->manifest);
    memset(m, 0, sizeof(*m));
}

wsync_status_t cli_model_fill(const cli_model_t *m, uint64_t version, void *dst, uint64_t off, uint64_t len)
{
    const wsync_safetensors_t *f;
    const wsync_manifest_t *man;
    size_t i;
    if (m->nfiles == 0) {
        wsync_fill_pattern(dst, len, off, version);
        return WSYNC_OK;
    }
    /* Version v is file (v-1) mod n; bytes outside tensors are zero. */
    f = m->files[(version - 1) % (uint64_t)m->nfiles];
    man = f->manifest;
    memset(dst, 0, len);
    /* Tensors are in offset order: start at the first one ending past `off`
     * (binary search) and stop at the first one starting past the range, so
     * an extent costs O(log n + its tensors), not O(n): an fsdp rank fills
     * one extent per tensor. */
    {
        size_t lo = 0, hi = man->ntensors;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (man->tensors[mid].offset + man->tensors[mid].size <= off)
                lo = mid + 1;
            else
                hi = mid;
        }
        i = lo;
    }
    for (; i < man->ntensors && man->tensors[i].offset < off + len; i++) {
        const wsync_tensor_t *t = &man->tensors[i];
        uint64_t lo = t->offset > off ? t->offset : off;
        uint64_t hi = t->offset + t->size < off + len ? t->offset + t->size : off + len;
        if (lo < hi)
            memcpy((char *)dst + (lo - off), f->data[i] + (lo - t->offset), hi - lo);
    }
    return WSYNC_OK;
}
