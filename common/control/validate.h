/* validate.h: declarative request validation: for every route that takes a
 * body, one schema (field, JSON type, required, range or size) checked by one
 * function that names the first bad field and what it must be. Every number
 * a route stores is range-checked here against the type it lands in. */
#ifndef WSYNC_CONTROL_VALIDATE_H
#define WSYNC_CONTROL_VALIDATE_H

#include <jansson.h>
#include <stddef.h>

/* Versions are below 2^53: exact in a double, so every JSON client (Python,
 * JavaScript, jq) reads them back unchanged. docs/API.md documents it. */
#define CTL_MAX_VERSION ((json_int_t)9007199254740991LL) /* 2^53 - 1 */
#define CTL_MAX_ENDPOINT 4096               /* a trainer's or engine's endpoint object, bytes as JSON */
#define CTL_MAX_NAME 127                    /* host names and ids, bytes */
#define CTL_MAX_BYTES ((json_int_t)1 << 62) /* sizes, offsets and byte counts */
#define CTL_MAX_DURATION_S 1e7              /* a report's duration_s (~115 days) */

typedef enum ctl_jtype {
    CTL_INT,        /* integer in [min, max] */
    CTL_NUMBER,     /* finite integer or real in [min, max] */
    CTL_STRING,     /* non-empty string of at most max bytes (0: any) */
    CTL_OBJECT,     /* object of at most max bytes as compact JSON (0: any); `sub` checks its fields */
    CTL_ARRAY,      /* array of at most max items (0: any); `sub` checks each item (an object) */
    CTL_ANY_STRING, /* string, may be empty, at most max bytes (0: any) */
} ctl_jtype_t;

typedef struct ctl_schema ctl_schema_t;

typedef struct ctl_field {
    const char *name;
    ctl_jtype_t type;
    int required;
    double min, max;         /* see ctl_jtype_t */
    const ctl_schema_t *sub; /* nested object / array items, or NULL */
    const char *hint;        /* appended to an out-of-range message: what to do */
} ctl_field_t;

struct ctl_schema {
    const ctl_field_t *fields;
    size_t n;
};

/* The routes' bodies. */
extern const ctl_schema_t ctl_req_register_trainer; /* POST /v1/trainers/register */
extern const ctl_schema_t ctl_req_register_engine;  /* POST /v1/engines/register */
extern const ctl_schema_t ctl_req_publish;          /* POST /v1/publish (layout, pieces[] nested) */
extern const ctl_schema_t ctl_req_report;           /* POST /v1/engines/<id>/report */
extern const ctl_schema_t ctl_req_layout;           /* POST /v1/layouts/<digest> */

/* 0 if `body` is an object that matches the schema; else 422 with a message
 * such as "field 'rank' must be an integer from 0 to 4095" (nested fields
 * named "layout.world", "pieces[3].len"). */
int ctl_check(const json_t *body, const ctl_schema_t *schema, char *err, size_t errlen);

#endif
