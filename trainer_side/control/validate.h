/* validate.h: declarative request validation: a table of fields (name, JSON
 * type, required) checked by one function that names the first bad field. */
#ifndef WSYNC_CONTROL_VALIDATE_H
#define WSYNC_CONTROL_VALIDATE_H

#include <jansson.h>
#include <stddef.h>

typedef enum ctl_jtype {
    CTL_INT,    /* integer >= 0 */
    CTL_NUMBER, /* integer or real >= 0 */
    CTL_STRING, /* non-empty string */
    CTL_OBJECT,
    CTL_ARRAY,
    CTL_ANY_STRING, /* string, may be empty */
} ctl_jtype_t;

typedef struct ctl_field {
    const char *name;
    ctl_jtype_t type;
    int required;
} ctl_field_t;

/* 0 if `body` is an object whose fields match the table; else 422 with a
 * message such as "field 'rank' must be a non-negative integer". */
int ctl_validate(const json_t *body, const ctl_field_t *fields, size_t n, char *err, size_t errlen);

#endif
