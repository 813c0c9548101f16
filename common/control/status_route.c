/* status_route.c: GET /v1/status. The document is written from the model's
 * records (model_status.c) once per state of the model and shared by every
 * request until it changes; a client that takes gzip gets it compressed
 * once the same document was asked for twice (a model that changes before
 * nearly every request is not compressed each time). */
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/control/gzip.h"
#include "common/control/server_internal.h"

/* The document's text, held by the cache and by the plain response (MHD
 * frees a response when the last connection sending it is done, which can
 * be after the cache moved on): freed when both let go. */
struct ctl_status_text {
    atomic_int refs;
    char *text;
    size_t len;
};

static void text_unref(void *cls)
{
    struct ctl_status_text *t = cls;
    if (t && atomic_fetch_sub(&t->refs, 1) == 1) {
        free(t->text);
        free(t);
    }
}

/* The "state_file" member of /v1/status (path, ok, failed_writes, error)
 * as JSON text, or NULL without a state file. */
static char *state_file_member(wsync_control_server_t *s)
{
    char why[512], *text, *out = NULL;
    uint64_t failures = 0;
    int failing;
    json_t *j;
    if (s->state_path == NULL)
        return NULL;
    failing = ctl_state_failing(s, why, sizeof(why), &failures, NULL);
    j = json_pack("{s:s, s:b, s:I, s:s*}", "path", s->state_path, "ok", !failing, "failed_writes",
                  (json_int_t)failures, "error", failing ? why : NULL);
    text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (text && asprintf(&out, "\"state_file\":%s", text) < 0)
        out = NULL;
    free(text);
    return out;
}

static void add_headers(struct MHD_Response *r, int gz)
{
    MHD_add_response_header(r, "Content-Type", "application/json");
    MHD_add_response_header(r, "Vary", "Accept-Encoding");
    if (gz)
        MHD_add_response_header(r, "Content-Encoding", "gzip");
}

/* The plain answer for the current key, built now; NULL: no memory. */
static struct MHD_Response *build_plain(wsync_control_server_t *s, double now)
{
    struct ctl_status_text *t = calloc(1, sizeof(*t));
    char *extra = state_file_member(s);
    double until = 0;
    struct MHD_Response *r = NULL;
    if (t)
        t->text = ctl_status_text(&s->model, now, extra, &t->len, &until);
    free(extra);
    if (t && t->text) {
        atomic_init(&t->refs, 2); /* the cache's and the response's */
        r = MHD_create_response_from_buffer_with_free_callback_cls(t->len, t->text, text_unref, t);
        if (r == NULL)
            atomic_store(&t->refs, 1);
    }
    if (r == NULL) {
        if (t)
            free(t->text);
        free(t);
        return NULL;
    }
    add_headers(r, 0);
    s->status_text = t;
    s->status_until = until;
    return s->status_resp = r;
}

/* The gzip answer of the cached text; NULL: no memory (the plain one
 * serves). */
static struct MHD_Response *build_gzip(wsync_control_server_t *s)
{
    size_t zlen = 0;
    char *z = ctl_gzip(s->status_text->text, s->status_text->len, &zlen);
    struct MHD_Response *r = z ? MHD_create_response_from_buffer(zlen, z, MHD_RESPMEM_MUST_FREE) : NULL;
    if (r == NULL) {
        free(z);
        return NULL;
    }
    add_headers(r, 1);
    return s->status_gz_resp = r;
}

void ctl_status_cache_drop(wsync_control_server_t *s)
{
    if (s->status_resp)
        MHD_destroy_response(s->status_resp);
    if (s->status_gz_resp)
        MHD_destroy_response(s->status_gz_resp);
    text_unref(s->status_text);
    s->status_resp = s->status_gz_resp = NULL;
    s->status_text = NULL;
}

enum MHD_Result ctl_status_answer(wsync_control_server_t *s, struct MHD_Connection *conn)
{
    uint64_t gen = ctl_generation(&s->model), failures = 0, changes = 0;
    double now = ctl_unix_now(); /* leases are in unix time */
    int gz = ctl_accepts_gzip(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept-Encoding"));
    struct MHD_Response *r;
    enum MHD_Result ret;
    ctl_state_failing(s, NULL, 0, &failures, &changes);
    pthread_mutex_lock(&s->cache_lock);
    if (s->status_resp == NULL || s->status_gen != gen || s->status_failures != failures ||
        s->status_changes != changes || now >= s->status_until) {
        ctl_status_cache_drop(s);
        s->status_gen = gen;
        s->status_failures = failures;
        s->status_changes = changes;
        r = build_plain(s, now); /* a new document: plain first */
    } else if (gz) {
        r = s->status_gz_resp ? s->status_gz_resp : build_gzip(s);
        if (r == NULL)
            r = s->status_resp;
    } else {
        r = s->status_resp;
    }
    ret = r ? MHD_queue_response(conn, 200, r) : MHD_NO;
    pthread_mutex_unlock(&s->cache_lock);
    return ret;
}
