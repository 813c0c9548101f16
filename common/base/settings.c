/* settings.c: the resolution of wsync's settings, whose table is in
 * settings_table.c (flag > environment > config file > default), parsed and
 * checked once. */
#include "common/base/settings.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/fault.h"
#include "common/base/util.h"

typedef struct value {
    char *text; /* owned copy of the text in effect */
    long long v;
    wsync_setting_source_t src;
} value_t;

static value_t values[WSYNC_SET_COUNT];
static char *file_text[WSYNC_SET_COUNT], *file_what[WSYNC_SET_COUNT];
static char *flag_text[WSYNC_SET_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;
static wsync_status_t init_status;
static char init_error[512];
/* Set while this thread resolves: an error recorded then logs, the log asks
 * for its level, and that must not wait on the resolution in progress. */
static __thread int resolving;

static void init_once(void);

static void ensure_init(void)
{
    if (!resolving)
        pthread_once(&once, init_once);
}

int wsync_settings_resolving(void)
{
    return resolving;
}

const wsync_setting_def_t *wsync_setting_def(wsync_setting_id_t id)
{
    return (unsigned)id < WSYNC_SET_COUNT ? &wsync_settings_table[id] : NULL;
}

int wsync_setting_find(const char *name)
{
    int i;
    for (i = 0; name && i < WSYNC_SET_COUNT; i++)
        if (strcmp(wsync_settings_table[i].name, name) == 0)
            return i;
    return -1;
}

static const char *accepted(const wsync_setting_def_t *d, char *buf, size_t len)
{
    switch (d->type) {
    case WSYNC_STYPE_INT: snprintf(buf, len, "an integer in %lld..%lld", d->min, d->max); break;
    case WSYNC_STYPE_SIZE: snprintf(buf, len, "a size in %lld..%lld bytes (4096, 64M, 1G)", d->min, d->max); break;
    case WSYNC_STYPE_BOOL: snprintf(buf, len, "1/0, true/false, yes/no or on/off"); break;
    case WSYNC_STYPE_MS:
        snprintf(buf, len, "a duration in %lld..%lld ms (500, 250ms, 10s, 2m)", d->min, d->max);
        break;
    case WSYNC_STYPE_ENUM: snprintf(buf, len, "one of %s", d->choices); break;
    case WSYNC_STYPE_STRING: snprintf(buf, len, "text"); break;
    }
    return buf;
}

static int parse_ll(const char *s, long long *out, char **end)
{
    errno = 0;
    *out = strtoll(s, end, 10);
    return errno == 0 && *end != s;
}

static int parse_ms(const char *s, long long *out)
{
    char *end;
    long long v, mult = 1;
    if (!parse_ll(s, &v, &end))
        return 0;
    if (strcmp(end, "ms") == 0 || *end == '\0')
        mult = 1;
    else if (strcmp(end, "s") == 0)
        mult = 1000;
    else if (strcmp(end, "m") == 0)
        mult = 60000;
    else if (strcmp(end, "h") == 0)
        mult = 3600000;
    else
        return 0;
    if (v > 0 && v > (long long)9e18 / mult)
        return 0;
    *out = v * mult;
    return 1;
}

static int parse_bool(const char *s, long long *out)
{
    static const char *yes[] = {"1", "true", "yes", "on"}, *no[] = {"0", "false", "no", "off"};
    size_t i;
    for (i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = 1;
            return 1;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = 0;
            return 1;
        }
    }
    return 0;
}

static int parse_enum(const char *choices, const char *s, long long *out)
{
    const char *p = choices;
    long long i = 0;
    size_t n = strlen(s);
    while (*p) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, s, n) == 0) {
            *out = i;
            return 1;
        }
        i++;
        p += len + (bar != NULL);
    }
    return 0;
}

wsync_status_t wsync_setting_parse(const wsync_setting_def_t *d, const char *text, const char *from, long long *out)
{
    char acc[128], *end = NULL;
    long long v = 0;
    int ok = 1, ranged = 0;
    uint64_t sz;

    switch (d->type) {
    case WSYNC_STYPE_INT:
        ok = parse_ll(text, &v, &end) && *end == '\0';
        ranged = 1;
        break;
    case WSYNC_STYPE_SIZE:
        ok = wsync_parse_size(text, d->name, &sz) == WSYNC_OK && sz <= (uint64_t)INT64_MAX;
        v = (long long)sz;
        ranged = 1;
        break;
    case WSYNC_STYPE_MS:
        ok = parse_ms(text, &v);
        ranged = 1;
        break;
    case WSYNC_STYPE_BOOL: ok = parse_bool(text, &v); break;
    case WSYNC_STYPE_ENUM: ok = parse_enum(d->choices, text, &v); break;
    case WSYNC_STYPE_STRING:
        if (d->check && !d->check(text))
            return wsync_error(WSYNC_ERR_INVALID, "setting %s (from %s): %s", d->name, from, wsync_last_error());
        break;
    }
    if (!ok)
        return wsync_error(WSYNC_ERR_INVALID, "setting %s = '%s' (from %s) does not parse: expected %s", d->name,
                           text, from, accepted(d, acc, sizeof(acc)));
    if (ranged && (v < d->min || v > d->max))
        return wsync_error(WSYNC_ERR_INVALID, "setting %s = '%s' (from %s) is out of range: expected %s", d->name,
                           text, from, accepted(d, acc, sizeof(acc)));
    *out = v;
    return WSYNC_OK;
}

static wsync_status_t resolve_one(int i, value_t *out)
{
    const wsync_setting_def_t *d = &wsync_settings_table[i];
    const char *env = getenv(d->env), *text = d->dflt;
    char from[320];
    long long v = 0;

    /* An empty variable counts as unset, as it always did. */
    out->src = WSYNC_SRC_DEFAULT;
    snprintf(from, sizeof(from), "the default");
    if (flag_text[i]) {
        text = flag_text[i];
        out->src = WSYNC_SRC_FLAG;
        snprintf(from, sizeof(from), "the command line");
    } else if (env && env[0]) {
        text = env;
        out->src = WSYNC_SRC_ENV;
        snprintf(from, sizeof(from), "the environment, %s", d->env);
    } else if (file_text[i]) {
        text = file_text[i];
        out->src = WSYNC_SRC_FILE;
        snprintf(from, sizeof(from), "%s", file_what[i]);
    }
    WSYNC_CHECK(wsync_setting_parse(d, text, from, &v));
    out->v = v;
    out->text = strdup(text);
    WSYNC_CHECK_ALLOC(out->text);
    return WSYNC_OK;
}

/* Replaced texts are kept, not freed: a string a getter handed out stays
 * valid even if a reload replaces it meanwhile (reloads are few: tests). */
static char **retired;
static size_t nretired;

static void replace_values(value_t *fresh)
{
    char **more = realloc(retired, (nretired + WSYNC_SET_COUNT) * sizeof(*retired));
    int i;
    if (more)
        retired = more;
    for (i = 0; i < WSYNC_SET_COUNT; i++) {
        if (values[i].text && more)
            retired[nretired++] = values[i].text;
        else
            free(values[i].text);
        values[i] = fresh[i];
    }
}

/* All or nothing: either every setting resolves or none changes. */
static wsync_status_t resolve_all(void)
{
    value_t fresh[WSYNC_SET_COUNT];
    wsync_status_t st = WSYNC_OK;
    int i, n;
    memset(fresh, 0, sizeof(fresh));
    for (n = 0; n < WSYNC_SET_COUNT && st == WSYNC_OK; n++)
        st = resolve_one(n, &fresh[n]);
    if (st != WSYNC_OK) {
        for (i = 0; i < n; i++)
            free(fresh[i].text);
        return st;
    }
    replace_values(fresh);
    return WSYNC_OK;
}

static void init_once(void)
{
    value_t dflt[WSYNC_SET_COUNT];
    int i;
    resolving = 1;
    for (i = 0; i < WSYNC_SET_COUNT; i++) {
        dflt[i] = (value_t){.text = strdup(wsync_settings_table[i].dflt), .src = WSYNC_SRC_DEFAULT};
        wsync_setting_parse(&wsync_settings_table[i], wsync_settings_table[i].dflt, "the default", &dflt[i].v);
    }
    replace_values(dflt);
    init_status = resolve_all();
    if (init_status != WSYNC_OK)
        snprintf(init_error, sizeof(init_error), "%s", wsync_last_error());
    resolving = 0;
}

wsync_status_t wsync_settings_init(void)
{
    ensure_init();
    if (init_status != WSYNC_OK)
        return wsync_error(init_status, "%s", init_error);
    return wsync_faults_init();
}

static wsync_status_t reresolve(void)
{
    resolving = 1;
    init_status = resolve_all();
    resolving = 0;
    init_error[0] = '\0';
    if (init_status != WSYNC_OK)
        snprintf(init_error, sizeof(init_error), "%s", wsync_last_error());
    return init_status;
}

static wsync_status_t json_text(const json_t *v, char *buf, size_t len)
{
    if (json_is_string(v))
        snprintf(buf, len, "%s", json_string_value(v));
    else if (json_is_integer(v))
        snprintf(buf, len, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, len, "%.17g", json_real_value(v));
    else if (json_is_boolean(v))
        snprintf(buf, len, "%d", json_is_true(v));
    else
        return WSYNC_ERR_FORMAT;
    return WSYNC_OK;
}

wsync_status_t wsync_settings_reload(void)
{
    ensure_init();
    WSYNC_CHECK(reresolve());
    return wsync_faults_reload();
}

static void set_text(char **slot, const char *text)
{
    free(*slot);
    *slot = text ? strdup(text) : NULL;
}

/* A file that fails leaves the settings as they were. */
wsync_status_t wsync_settings_load_json(const json_t *obj, const char *what)
{
    char *old_text[WSYNC_SET_COUNT], *old_what[WSYNC_SET_COUNT];
    const char *key;
    json_t *v;
    char text[1024], from[300];
    wsync_status_t st = WSYNC_OK;
    int i;

    ensure_init();
    if (!json_is_object(obj))
        return wsync_error(WSYNC_ERR_FORMAT, "%s: \"settings\" must be an object of setting: value", what);
    memcpy(old_text, file_text, sizeof(old_text));
    memcpy(old_what, file_what, sizeof(old_what));
    memset(file_text, 0, sizeof(file_text));
    memset(file_what, 0, sizeof(file_what));
    snprintf(from, sizeof(from), "config file %s", what);
    json_object_foreach((json_t *)obj, key, v)
    {
        i = wsync_setting_find(key);
        if (i < 0) {
            st = wsync_error(WSYNC_ERR_INVALID, "%s: settings.%s is not a setting (`wsync config` lists them)",
                             what, key);
            break;
        }
        if (json_text(v, text, sizeof(text)) != WSYNC_OK) {
            st = wsync_error(WSYNC_ERR_FORMAT, "%s: settings.%s must be a string, number or boolean", what, key);
            break;
        }
        set_text(&file_text[i], text);
        set_text(&file_what[i], from);
        if (file_text[i] == NULL || file_what[i] == NULL) {
            st = wsync_error(WSYNC_ERR_NOMEM, "out of memory reading %s", what);
            break;
        }
    }
    if (st == WSYNC_OK)
        st = reresolve();
    for (i = 0; i < WSYNC_SET_COUNT; i++) {
        if (st == WSYNC_OK) {
            free(old_text[i]);
            free(old_what[i]);
        } else {
            free(file_text[i]);
            free(file_what[i]);
            file_text[i] = old_text[i];
            file_what[i] = old_what[i];
        }
    }
    if (st != WSYNC_OK) {
        char why[512];
        snprintf(why, sizeof(why), "%s", wsync_last_error());
        reresolve();
        return wsync_error(st, "%s", why);
    }
    return WSYNC_OK;
}

wsync_status_t wsync_settings_set_flag(const char *name, const char *value)
{
    int i = wsync_setting_find(name);
    ensure_init();
    if (i < 0)
        return wsync_error(WSYNC_ERR_INVALID, "'%s' is not a setting (`wsync config` lists them)", name);
    free(flag_text[i]);
    flag_text[i] = strdup(value ? value : "");
    WSYNC_CHECK_ALLOC(flag_text[i]);
    return reresolve();
}

long long wsync_setting_int(wsync_setting_id_t id)
{
    ensure_init();
    return (unsigned)id < WSYNC_SET_COUNT ? values[id].v : 0;
}

const char *wsync_setting_str(wsync_setting_id_t id)
{
    ensure_init();
    return (unsigned)id < WSYNC_SET_COUNT && values[id].text ? values[id].text : "";
}

const char *wsync_setting_text(wsync_setting_id_t id)
{
    return wsync_setting_str(id);
}

wsync_setting_source_t wsync_setting_source(wsync_setting_id_t id)
{
    ensure_init();
    return (unsigned)id < WSYNC_SET_COUNT ? values[id].src : WSYNC_SRC_DEFAULT;
}

const char *wsync_setting_source_name(wsync_setting_source_t src)
{
    switch (src) {
    case WSYNC_SRC_FILE: return "config file";
    case WSYNC_SRC_ENV: return "env";
    case WSYNC_SRC_FLAG: return "flag";
    default: return "default";
    }
}

void wsync_host_id(const char *explicit_id, char *out, size_t len)
{
    const char *set = wsync_setting_str(WSYNC_SET_HOST_ID);
    if (explicit_id && explicit_id[0])
        snprintf(out, len, "%s", explicit_id);
    else if (set[0])
        snprintf(out, len, "%s", set);
    else if (gethostname(out, len) != 0 || out[0] == '\0')
        snprintf(out, len, "localhost");
    if (len > 0)
        out[len - 1] = '\0';
}

int wsync_connect_timeout_ms(int given)
{
    return given > 0 ? given : (int)wsync_setting_int(WSYNC_SET_CONNECT_TIMEOUT_MS);
}
