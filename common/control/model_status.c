/* model_status.c: GET /v1/status written straight from the model's records
 * into one buffer: no json_t tree per build (1000 engine nodes: one pass of
 * snprintf). The text is the one jansson would dump for the same document
 * (field order, number and string forms), which model_status_test checks
 * against ctl_status_json. Presence is computed from the clock it is given:
 * a lease that expired shows as gone at once, not at the next sweep, and the
 * caller learns until when the text stays true (*valid_until). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/control/model.h"

typedef struct buf {
    char *p;
    size_t len, cap;
    int failed;
} buf_t;

static void put(buf_t *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        char *np;
        while (b->len + n + 1 > cap)
            cap *= 2;
        if ((np = realloc(b->p, cap)) == NULL) {
            b->failed = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void puts_(buf_t *b, const char *s)
{
    put(b, s, strlen(s));
}

static void putf(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(buf_t *b, const char *fmt, ...)
{
    char tmp[128], *big;
    va_list ap, again;
    int n;
    va_start(ap, fmt);
    va_copy(again, ap);
    n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
    } else if ((size_t)n < sizeof(tmp)) {
        put(b, tmp, (size_t)n);
    } else if ((big = malloc((size_t)n + 1)) == NULL) {
        b->failed = 1; /* a long field formats on the heap: no length limit */
    } else {
        vsnprintf(big, (size_t)n + 1, fmt, again);
        put(b, big, (size_t)n);
        free(big);
    }
    va_end(again);
}

/* A real as jansson writes it: %.17g, ".0" when it would read back as an
 * integer, the exponent without '+' or leading zeros. */
static void put_real(buf_t *b, double v)
{
    char t[64], *e;
    int n = snprintf(t, sizeof(t), "%.17g", v);
    if (n < 0 || (size_t)n >= sizeof(t) - 3) {
        b->failed = 1;
        return;
    }
    if (strchr(t, '.') == NULL && strchr(t, 'e') == NULL)
        memcpy(t + n, ".0", 3);
    if ((e = strchr(t, 'e')) != NULL) {
        char *start = e + 1, *end = start + 1;
        if (*start == '-')
            start++;
        while (*end == '0')
            end++;
        if (end != start)
            memmove(start, end, strlen(end) + 1);
    }
    puts_(b, t);
}

/* Bytes of the UTF-8 sequence at s (1..4), or 0 when it is not one. */
static int utf8_len(const unsigned char *s)
{
    int n, i;
    uint32_t cp;
    if (s[0] < 0x80)
        return 1;
    n = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : 0;
    if (n == 0)
        return 0;
    cp = s[0] & (0xff >> (n + 1));
    for (i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return n;
}

/* 1 when `s` is UTF-8 (what a JSON string can hold). */
static int utf8_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    int n;
    while (*p) {
        if ((n = utf8_len(p)) == 0)
            return 0;
        p += n;
    }
    return 1;
}

/* A JSON string as jansson escapes it (control characters, '"', '\\'). */
static void put_str(buf_t *b, const char *s)
{
    const char *run = s;
    put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        const char *esc = c == '"'    ? "\\\""
                          : c == '\\' ? "\\\\"
                          : c == '\b' ? "\\b"
                          : c == '\f' ? "\\f"
                          : c == '\n' ? "\\n"
                          : c == '\r' ? "\\r"
                          : c == '\t' ? "\\t"
                                      : NULL;
        if (esc == NULL && c >= 0x20)
            continue;
        put(b, run, (size_t)(s - run));
        if (esc)
            puts_(b, esc);
        else
            putf(b, "\\u%04X", c);
        run = s + 1;
    }
    put(b, run, (size_t)(s - run));
    put(b, "\"", 1);
}

/* An object member's JSON (compact, jansson's key order), or nothing. */
static void put_json(buf_t *b, const char *key, const json_t *v)
{
    char *t;
    if (v == NULL)
        return;
    t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (t == NULL) {
        b->failed = 1;
        return;
    }
    putf(b, ",\"%s\":", key);
    puts_(b, t);
    free(t);
}

/* Gone: marked by the sweep, or not seen for the lease by `now`. */
static int is_gone(int gone, double last_seen, double lease, double now)
{
    return gone || now - last_seen >= lease;
}

static void engine_text(buf_t *b, const ctl_model_t *m, const ctl_engine_t *e, double lease, double now)
{
    const uint64_t held = e->version < m->latest ? e->version : m->latest;
    if (!isfinite(e->last_sync_s) || !isfinite(e->last_gbps) || !isfinite(e->updated) || !isfinite(e->last_seen) ||
        !utf8_ok(e->host) || !utf8_ok(e->last_error) || !utf8_ok(e->node)) {
        /* Never left out silently: logged, shown with what is known and why. */
        LOG_ERROR("engine %s: its status entry cannot be built (a field is not valid JSON: host, last_error, "
                  "node, or a non-finite figure); shown with an error field",
                  e->id);
        puts_(b, "{\"id\":");
        put_str(b, e->id);
        puts_(b, ",\"state\":");
        put_str(b, e->state);
        putf(b,
             ",\"version\":%llu,\"error\":\"this engine's status entry could not be built (see the endpoint's "
             "log)\"}",
             (unsigned long long)e->version);
        return;
    }
    puts_(b, "{\"id\":");
    put_str(b, e->id);
    puts_(b, ",\"host\":");
    put_str(b, e->host);
    putf(b, ",\"local_ranks\":%d,\"state\":", e->local_ranks);
    put_str(b, e->state);
    putf(b, ",\"version\":%llu,\"target\":%llu,\"behind\":%llu,\"last_sync_s\":", (unsigned long long)e->version,
         (unsigned long long)e->target, (unsigned long long)(m->latest - held));
    put_real(b, e->last_sync_s);
    puts_(b, ",\"last_gbps\":");
    put_real(b, e->last_gbps);
    puts_(b, ",\"last_error\":");
    put_str(b, e->last_error);
    puts_(b, ",\"updated\":");
    put_real(b, e->updated);
    put_json(b, "endpoint", e->endpoint);
    putf(b, ",\"presence\":\"%s\",\"last_seen\":", is_gone(e->gone, e->last_seen, lease, now) ? "gone" : "live");
    put_real(b, e->last_seen);
    putf(b, ",\"exited\":%s,\"failures\":%llu", e->exited ? "true" : "false", (unsigned long long)e->failures);
    if (e->node[0]) {
        puts_(b, ",\"node\":");
        put_str(b, e->node);
    }
    if (e->delta_total.pieces + e->delta_total.refetched > 0) { /* as model_views.c's engine_json */
        /* putf writes at most 127 bytes at a time */
        putf(b, ",\"delta\":{\"pieces\":%llu,\"wire_bytes\":%llu", (unsigned long long)e->last_delta.pieces,
             (unsigned long long)e->last_delta.wire_bytes);
        putf(b, ",\"saved_bytes\":%llu,\"refetched\":%llu",
             (unsigned long long)(e->last_delta.piece_bytes - e->last_delta.wire_bytes),
             (unsigned long long)e->last_delta.refetched);
        putf(b, ",\"saved_bytes_total\":%llu,\"refetched_total\":%llu}",
             (unsigned long long)(e->delta_total.piece_bytes - e->delta_total.wire_bytes),
             (unsigned long long)e->delta_total.refetched);
    }
    if (e->phase[0]) {
        puts_(b, ",\"progress\":{\"phase\":");
        put_str(b, e->phase);
        putf(b, ",\"bytes\":%llu,\"total\":%llu}", (unsigned long long)e->progress_bytes,
             (unsigned long long)e->progress_total);
    }
    put(b, "}", 1);
}

static void trainers_text(buf_t *b, const ctl_model_t *m, double lease, double now)
{
    int r;
    put(b, "[", 1);
    for (r = 0; r < m->world; r++) {
        const ctl_trainer_t *t = &m->trainers[r];
        putf(b, "%s{\"rank\":%d,\"registered\":%s,\"host\":", r ? "," : "", r, t->registered ? "true" : "false");
        put_str(b, t->host);
        put_json(b, "endpoint", t->endpoint);
        putf(b, ",\"version\":%llu,\"presence\":\"%s\",\"last_seen\":", (unsigned long long)t->version,
             !t->registered                               ? "unregistered"
             : is_gone(t->gone, t->last_seen, lease, now) ? "gone"
                                                          : "live");
        put_real(b, t->last_seen);
        put(b, "}", 1);
    }
    put(b, "]", 1);
}

/* The earliest time a live entry's lease runs out (INFINITY: none). */
static double next_expiry(const ctl_model_t *m, double lease, double now)
{
    double t = INFINITY;
    int i;
    for (i = 0; i < m->world; i++)
        if (m->trainers[i].registered && !is_gone(m->trainers[i].gone, m->trainers[i].last_seen, lease, now) &&
            m->trainers[i].last_seen + lease < t)
            t = m->trainers[i].last_seen + lease;
    for (i = 0; i < m->nengines; i++)
        if (!is_gone(m->engines[i].gone, m->engines[i].last_seen, lease, now) && m->engines[i].last_seen + lease < t)
            t = m->engines[i].last_seen + lease;
    return t;
}

char *ctl_status_text(ctl_model_t *m, double now, const char *extra, size_t *len, double *valid_until)
{
    buf_t b = {0};
    json_t *pending;
    int i;
    if (now <= 0)
        now = ctl_unix_now();
    pthread_mutex_lock(&m->lock);
    double lease = m->lease_s > 0 ? m->lease_s : CTL_LEASE_S;
    putf(&b, "{\"latest_version\":%llu,\"published_at\":", (unsigned long long)m->latest);
    put_real(&b, m->latest_at);
    putf(&b, ",\"world\":%d,\"trainers\":", m->world);
    trainers_text(&b, m, lease, now);
    puts_(&b, ",\"engines\":[");
    for (i = 0; i < m->nengines; i++) {
        if (i)
            put(&b, ",", 1);
        engine_text(&b, m, &m->engines[i], lease, now);
    }
    putf(&b, "],\"pending\":%d", m->npending);
    pending = ctl_pending_json_locked(m);
    put_json(&b, "pending_versions", pending);
    json_decref(pending);
    puts_(&b, ",\"lease_s\":");
    put_real(&b, lease);
    if (valid_until)
        *valid_until = next_expiry(m, lease, now);
    pthread_mutex_unlock(&m->lock);
    if (extra && extra[0]) {
        put(&b, ",", 1);
        puts_(&b, extra);
    }
    put(&b, "}", 1);
    if (b.failed || b.p == NULL) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}
