/* layout_files.c: the layouts' files beside the state file. */
#include "common/control/layout_files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/control/state_file.h"

static void file_of(const char *state_path, const char *digest, char *out, size_t len)
{
    snprintf(out, len, "%s.layout-%s.json", state_path, digest);
}

wsync_status_t ctl_layout_files_write(ctl_model_t *m, const char *state_path)
{
    ctl_layout_file_t *f = NULL;
    wsync_status_t st = WSYNC_OK;
    char path[4096];
    int n = ctl_layouts_unsaved(m, &f), i;
    if (n < 0)
        return wsync_error(WSYNC_ERR_NOMEM, "state file %s: out of memory listing layouts", state_path);
    for (i = 0; i < n; i++) {
        if (st == WSYNC_OK) {
            file_of(state_path, f[i].digest, path, sizeof(path));
            st = ctl_state_save(path, f[i].doc);
            if (st == WSYNC_OK)
                ctl_layout_mark_saved(m, f[i].digest);
        }
        json_decref(f[i].doc);
    }
    free(f);
    return st;
}

void ctl_layout_files_remove(const char *state_path, char (*digests)[33], int n)
{
    char path[4096];
    int i;
    for (i = 0; i < n; i++) {
        file_of(state_path, digests[i], path, sizeof(path));
        if (unlink(path) != 0 && errno != ENOENT)
            LOG_WARN("state file: cannot remove %s: %s", path, strerror(errno));
    }
}

wsync_status_t ctl_layout_files_load(ctl_model_t *m, const json_t *state, const char *state_path)
{
    const json_t *list = ctl_state_layouts(state), *d;
    char path[4096];
    size_t i;
    json_array_foreach(list, i, d)
    {
        const char *digest = json_string_value(d);
        json_t *doc = NULL;
        int rc;
        if (!ctl_layout_digest_ok(digest))
            return wsync_error(WSYNC_ERR_FORMAT,
                               "state file %s: layouts[%zu] is not a layout digest; fix or "
                               "move it away",
                               state_path, i);
        file_of(state_path, digest, path, sizeof(path));
        WSYNC_CHECK(ctl_state_read(path, &doc));
        if (doc == NULL || !json_is_object(json_object_get(doc, "manifest")) ||
            !json_equal(json_object_get(doc, "digest"), d)) {
            json_decref(doc);
            return wsync_error(WSYNC_ERR_FORMAT,
                               "state file %s lists layout %s, but %s is %s; restore it, or move "
                               "the state file away to start from scratch",
                               state_path, digest, path, doc ? "not that layout" : "missing");
        }
        pthread_mutex_lock(&m->lock);
        rc = ctl_layout_add_locked(m, digest, json_object_get(doc, "manifest"), 1);
        pthread_mutex_unlock(&m->lock);
        json_decref(doc);
        if (rc != 0)
            return wsync_error(WSYNC_ERR_NOMEM, "state file %s: out of memory loading layout %s", state_path,
                               digest);
    }
    return WSYNC_OK;
}
