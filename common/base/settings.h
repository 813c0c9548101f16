/* settings.h: every setting wsync reads, declared once (settings.c's table):
 * name (also the config-file key), type, default, accepted range, environment
 * variable and one line of doc. Values are parsed and range-checked once,
 * when first needed; a value that does not parse or is out of range is
 * refused with a message naming the setting, where it came from and what is
 * accepted.
 *
 * Where a value comes from, highest first: a command-line flag, the
 * environment, the config file (`--config FILE`, its "settings" object), the
 * default. Test-only fault hooks are not settings: see common/base/fault.h. */
#ifndef WSYNC_COMMON_SETTINGS_H
#define WSYNC_COMMON_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/wsync.h"

typedef enum wsync_setting_id {
    WSYNC_SET_LOG,
    WSYNC_SET_TRACE,
    WSYNC_SET_TOKEN,
    WSYNC_SET_HOST_ID,
    WSYNC_SET_CONNECT_TIMEOUT_MS,
    WSYNC_SET_PUBLISH_THREADS,
    WSYNC_SET_LOCAL_TRANSPORT,
    WSYNC_SET_GPU_SHARED_LANDING,
    WSYNC_SET_SPARSE_IMAGE,
    WSYNC_SET_TCP_PORT,
    WSYNC_SET_TCP_CONNS,
    WSYNC_SET_VERBS_PORT,
    WSYNC_SET_IB_DEVICES,
    WSYNC_SET_IB_GID_INDEX,
    WSYNC_SET_IB_TIMEOUT,
    WSYNC_SET_IB_RETRY_CNT,
    WSYNC_SET_NCCL_OP_TIMEOUT_MS,
    WSYNC_SET_NCCL_GROUP,
    WSYNC_SET_CONTROL_GRACE_MS,
    WSYNC_SET_TCP_STALL_MS,
    WSYNC_SET_PLAN,
    WSYNC_SET_RELAY_STALL_MS,
    WSYNC_SET_LINKS,
    WSYNC_SET_LATE_DIGESTS,
    WSYNC_SET_HEARTBEAT_MS,
    WSYNC_SET_DELTA,
    WSYNC_SET_DELTA_BASES,
    WSYNC_SET_DELTA_DENSITY,
    WSYNC_SET_DIRECT_PACK,
    WSYNC_SET_DIGEST_MERGE,
    WSYNC_SET_COUNT
} wsync_setting_id_t;

typedef enum wsync_setting_type {
    WSYNC_STYPE_INT,    /* decimal integer in [min, max] */
    WSYNC_STYPE_SIZE,   /* bytes: 4096, 64M, 1G (in [min, max]) */
    WSYNC_STYPE_BOOL,   /* 1/0, true/false, yes/no, on/off */
    WSYNC_STYPE_STRING, /* any text (a check function may refuse it) */
    WSYNC_STYPE_MS,     /* duration in ms: 500, 500ms, 10s, 2m (in [min, max] ms) */
    WSYNC_STYPE_ENUM,   /* one of `choices`; the value is its index */
} wsync_setting_type_t;

typedef enum wsync_setting_source {
    WSYNC_SRC_DEFAULT,
    WSYNC_SRC_FILE,
    WSYNC_SRC_ENV,
    WSYNC_SRC_FLAG,
} wsync_setting_source_t;

typedef struct wsync_setting_def {
    const char *name; /* config-file key and name in messages */
    wsync_setting_type_t type;
    const char *dflt;                /* default, written as the environment would */
    long long min, max;              /* accepted range (int, size, ms) */
    const char *env;                 /* environment variable */
    const char *choices;             /* enum: "a|b|c" */
    int secret;                      /* never printed (wsync config shows "(set)") */
    int (*check)(const char *value); /* string: 1 if valid, else 0 with the last error set */
    const char *doc;                 /* one line */
} wsync_setting_def_t;

/* The table, in id order. */
/* Every setting, indexed by its id (common/base/settings_table.c). */
extern const wsync_setting_def_t wsync_settings_table[WSYNC_SET_COUNT];

const wsync_setting_def_t *wsync_setting_def(wsync_setting_id_t id);
/* The id of the setting called `name`, or -1. */
int wsync_setting_find(const char *name);

/* Resolves every setting from the environment (and whatever load_json and
 * set_flag gave) once, and checks the test hooks (common/base/fault.h); later
 * calls return the first result. Library entry
 * points (publisher, receiver, control server) call it and fail with its
 * error, so a bad WSYNC_* value is refused at start. Thread-safe. */
wsync_status_t wsync_settings_init(void);

/* 1 while the calling thread is resolving settings (the log then uses its
 * default level rather than wait for the result). */
int wsync_settings_resolving(void);

/* Command-line side, called before any thread that reads settings starts
 * (not thread-safe against getters): `obj` is a config file's "settings"
 * object (`what` names the file in messages), or one flag `name`=`value`.
 * Both re-check every setting and fail naming the bad one. */
wsync_status_t wsync_settings_load_json(const json_t *obj, const char *what);
wsync_status_t wsync_settings_set_flag(const char *name, const char *value);

/* Reads the environment (settings and test hooks) again: for tests that
 * change a variable between cases. Not while other threads start work. */
wsync_status_t wsync_settings_reload(void);

/* Typed getters. After a failed init they return the defaults. int, size,
 * bool, ms and enum (the choice's index) read wsync_setting_int; strings
 * read wsync_setting_str (never NULL; "" when unset). */
long long wsync_setting_int(wsync_setting_id_t id);
const char *wsync_setting_str(wsync_setting_id_t id);
wsync_setting_source_t wsync_setting_source(wsync_setting_id_t id);
const char *wsync_setting_source_name(wsync_setting_source_t src);
/* The raw text of the value in effect (as given, or the default). */
const char *wsync_setting_text(wsync_setting_id_t id);

/* This machine's host id: `explicit_id` when non-empty, else the host_id
 * setting, else the host name ("localhost" if there is none). */
void wsync_host_id(const char *explicit_id, char *out, size_t len);

/* Milliseconds: `given` when > 0, else the connect_timeout_ms setting. */
int wsync_connect_timeout_ms(int given);

/* Parses `text` as `def` says into *out (ints, sizes, ms, bools, enum
 * index; 0 for strings); on failure the last error names the setting. */
wsync_status_t wsync_setting_parse(const wsync_setting_def_t *def, const char *text, const char *from,
                                   long long *out);

#endif
