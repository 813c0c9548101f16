/* settings.c: the one table of wsync's settings, and their resolution
 * (flag > environment > config file > default), parsed and checked once. */
#include "common/settings.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/checks.h"
#include "common/fault.h"
#include "common/plan_spec.h"
#include "common/transport/verbs_select.h"
#include "common/util.h"

static int check_ib_devices(const char *v)
{
    return verbs_dev_spec_valid(v && v[0] ? v : NULL);
}

/* Defaults are written as the environment would write them. Ranges are the
 * ones the code can honour: a port is 0..65535, the verbs ack timeout
 * exponent 1..31 and retry count 0..7 are what the hardware takes, 16 TCP
 * connections and 8 NCCL ops per group are the arrays' sizes. */
static const wsync_setting_def_t table[WSYNC_SET_COUNT] = {
    [WSYNC_SET_LOG] = {.name = "log",
                       .type = WSYNC_STYPE_ENUM,
                       .dflt = "warn",
                       .env = "WSYNC_LOG",
                       .choices = "error|warn|info|debug",
                       .doc = "messages at or below this level go to stderr (`serve` shows info)"},
    [WSYNC_SET_TRACE] = {.name = "trace",
                         .type = WSYNC_STYPE_BOOL,
                         .dflt = "0",
                         .env = "WSYNC_TRACE",
                         .doc = "a timestamped line per phase of a pull, one clock for all processes of a host"},
    [WSYNC_SET_TOKEN] = {.name = "token",
                         .type = WSYNC_STYPE_STRING,
                         .dflt = "",
                         .env = "WSYNC_TOKEN",
                         .secret = 1,
                         .doc = "the deployment's token: sent to the control endpoint and proven on every "
                                "data-plane connection (docs/SECURITY.md), when the caller gives none"},
    [WSYNC_SET_HOST_ID] = {.name = "host_id",
                           .type = WSYNC_STYPE_STRING,
                           .dflt = "",
                           .env = "WSYNC_HOST_ID",
                           .doc = "this machine's id (node boards and colocated trainer ranks are matched by "
                                  "it); empty: the host name"},
    [WSYNC_SET_CONNECT_TIMEOUT_MS] = {.name = "connect_timeout_ms",
                                      .type = WSYNC_STYPE_MS,
                                      .dflt = "10000",
                                      .min = 1,
                                      .max = 3600000,
                                      .env = "WSYNC_CONNECT_TIMEOUT_MS",
                                      .doc = "connect and handshake timeout of transports and the pull-request "
                                             "channel"},
    [WSYNC_SET_PUBLISH_THREADS] = {.name = "publish_threads",
                                   .type = WSYNC_STYPE_INT,
                                   .dflt = "0",
                                   .min = 0,
                                   .max = 8,
                                   .env = "WSYNC_PUBLISH_THREADS",
                                   .doc = "threads that digest and copy a publish in host memory; 0: one per CPU "
                                          "(at most 8)"},
    [WSYNC_SET_LOCAL_TRANSPORT] = {.name = "local_transport",
                                   .type = WSYNC_STYPE_BOOL,
                                   .dflt = "1",
                                   .env = "WSYNC_LOCAL_TRANSPORT",
                                   .doc = "pull from a trainer rank on this host's GPUs by CUDA IPC copy (0: use "
                                          "the configured transport)"},
    [WSYNC_SET_GPU_SHARED_LANDING] = {.name = "gpu_shared_landing",
                                      .type = WSYNC_STYPE_BOOL,
                                      .dflt = "1",
                                      .env = "WSYNC_GPU_SHARED_LANDING",
                                      .doc = "local ranks sharing the GPU of the trainer rank that owns a chunk "
                                             "each "
                                             "copy it from the trainer (0: one lands it, the others copy it from "
                                             "that "
                                             "rank)"},
    [WSYNC_SET_SPARSE_IMAGE] = {.name = "sparse_image",
                                .type = WSYNC_STYPE_BOOL,
                                .dflt = "1",
                                .env = "WSYNC_SPARSE_IMAGE",
                                .doc = "in place into the caller's tensors with a target: in host memory free the "
                                       "image's pages chunk by chunk, trainers putting in chunk order one put at "
                                       "a time; in GPU memory over tcp back only the bytes that do not land "
                                       "straight in the tensors (0: keep a whole image)"},
    [WSYNC_SET_TCP_PORT] = {.name = "tcp_port",
                            .type = WSYNC_STYPE_INT,
                            .dflt = "0",
                            .min = 0,
                            .max = 65535,
                            .env = "WSYNC_TCP_PORT",
                            .doc = "port the tcp transport of an engine rank listens on; 0: any free port"},
    [WSYNC_SET_TCP_CONNS] = {.name = "tcp_conns",
                             .type = WSYNC_STYPE_INT,
                             .dflt = "4",
                             .min = 1,
                             .max = 16,
                             .env = "WSYNC_TCP_CONNS",
                             .doc = "TCP connections per trainer-engine pair (puts are spread over them)"},
    [WSYNC_SET_VERBS_PORT] = {.name = "verbs_port",
                              .type = WSYNC_STYPE_INT,
                              .dflt = "0",
                              .min = 0,
                              .max = 65535,
                              .env = "WSYNC_VERBS_PORT",
                              .doc = "TCP port of the verbs transport's queue-pair handshake; 0: any free port"},
    [WSYNC_SET_IB_DEVICES] = {.name = "ib_devices",
                              .type = WSYNC_STYPE_STRING,
                              .dflt = "",
                              .env = "WSYNC_IB_DEVICES",
                              .check = check_ib_devices,
                              .doc = "RDMA devices to use, `name[:port]` list (`mlx5_0:1,mlx5_1`, `^mlx5_2`); "
                                     "empty: every active port"},
    [WSYNC_SET_IB_GID_INDEX] = {.name = "ib_gid_index",
                                .type = WSYNC_STYPE_INT,
                                .dflt = "-1",
                                .min = -1,
                                .max = 255,
                                .env = "WSYNC_IB_GID_INDEX",
                                .doc = "RoCE GID index; -1: the first RoCE v2 IPv4-mapped GID"},
    [WSYNC_SET_IB_TIMEOUT] = {.name = "ib_timeout",
                              .type = WSYNC_STYPE_INT,
                              .dflt = "14",
                              .min = 1,
                              .max = 31,
                              .env = "WSYNC_IB_TIMEOUT",
                              .doc = "verbs ack timeout exponent (4.096 us x 2^N; 14: a dead peer is seen in "
                                     "about 0.5 s)"},
    [WSYNC_SET_IB_RETRY_CNT] = {.name = "ib_retry_cnt",
                                .type = WSYNC_STYPE_INT,
                                .dflt = "7",
                                .min = 0,
                                .max = 7,
                                .env = "WSYNC_IB_RETRY_CNT",
                                .doc = "verbs transport retries before a queue pair fails"},
    [WSYNC_SET_NCCL_OP_TIMEOUT_MS] = {.name = "nccl_op_timeout_ms",
                                      .type = WSYNC_STYPE_MS,
                                      .dflt = "60000",
                                      .min = 1,
                                      .max = 3600000,
                                      .env = "WSYNC_NCCL_OP_TIMEOUT_MS",
                                      .doc = "an NCCL send/recv group without any completion for this long "
                                             "fails (the peer is gone)"},
    [WSYNC_SET_NCCL_GROUP] = {.name = "nccl_group",
                              .type = WSYNC_STYPE_INT,
                              .dflt = "8",
                              .min = 1,
                              .max = 8,
                              .env = "WSYNC_NCCL_GROUP",
                              .doc = "NCCL ops issued per group (both sides must agree)"},
    [WSYNC_SET_CONTROL_GRACE_MS] = {.name = "control_grace_ms",
                                    .type = WSYNC_STYPE_MS,
                                    .dflt = "60000",
                                    .min = 0,
                                    .max = 86400000,
                                    .env = "WSYNC_CONTROL_GRACE_MS",
                                    .doc = "how long trainers and engines retry an unreachable control endpoint "
                                           "(backoff with jitter) before a call fails; 0: no retries"},
    [WSYNC_SET_TCP_STALL_MS] = {.name = "tcp_stall_ms",
                                .type = WSYNC_STYPE_MS,
                                .dflt = "10000",
                                .min = 0,
                                .max = 3600000,
                                .env = "WSYNC_TCP_STALL_MS",
                                .doc = "a trainer's tcp put to a receiver that reads nothing for this long fails "
                                       "(frees the publish slot for the others); 0: no limit"},
    [WSYNC_SET_PLAN] = {.name = "plan",
                        .type = WSYNC_STYPE_STRING,
                        .dflt = "auto",
                        .env = "WSYNC_PLAN",
                        .check = wsync_plan_spec_valid,
                        .doc = "how engine nodes get a version: `direct` (every node from the trainer ranks), "
                               "`relay:F` (trees of fan-out F through engine nodes, `relay:1` a chain; "
                               "relays put over tcp, to nodes of the same targets), `auto` (the cost model's "
                               "choice with `links`, "
                               "else direct)"},
    [WSYNC_SET_RELAY_STALL_MS] = {.name = "relay_stall_ms",
                                  .type = WSYNC_STYPE_MS,
                                  .dflt = "3000",
                                  .min = 1,
                                  .max = 3600000,
                                  .env = "WSYNC_RELAY_STALL_MS",
                                  .doc = "a relay node that lands no piece for this long is given up: the node "
                                         "gets the missing pieces from the trainer ranks"},
    [WSYNC_SET_LINKS] = {.name = "links",
                         .type = WSYNC_STYPE_STRING,
                         .dflt = "",
                         .env = "WSYNC_LINKS",
                         .doc = "links file of this machine kind (configs/links/, or one `wsync calibrate` wrote) "
                                "for the cost model: `wsync plan --predict` and plan=auto; empty: none"},
    [WSYNC_SET_LATE_DIGESTS] = {.name = "late_digests",
                                .type = WSYNC_STYPE_ENUM,
                                .dflt = "auto",
                                .env = "WSYNC_LATE_DIGESTS",
                                .choices = "auto|on|off",
                                .doc = "a single-copy publish announces the version before its digests and "
                                       "posts them when done, engines landing meanwhile (auto: GPU trainers "
                                       "whose share is 512 MiB or more)"},
    [WSYNC_SET_HEARTBEAT_MS] = {.name = "heartbeat_ms",
                                .type = WSYNC_STYPE_MS,
                                .dflt = "10000",
                                .min = 0,
                                .max = 3600000,
                                .env = "WSYNC_HEARTBEAT_MS",
                                .doc = "trainer ranks and engine nodes register again this often so the control "
                                       "endpoint sees them live (`serve --lease`); 0: never"},
};

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
    return (unsigned)id < WSYNC_SET_COUNT ? &table[id] : NULL;
}

int wsync_setting_find(const char *name)
{
    int i;
    for (i = 0; name && i < WSYNC_SET_COUNT; i++)
        if (strcmp(table[i].name, name) == 0)
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
    const wsync_setting_def_t *d = &table[i];
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
        dflt[i] = (value_t){.text = strdup(table[i].dflt), .src = WSYNC_SRC_DEFAULT};
        wsync_setting_parse(&table[i], table[i].dflt, "the default", &dflt[i].v);
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
