/* validate.c: one validator for every request table. */
#include "trainer_side/control/validate.h"

#include <stdio.h>

static const char *type_name(ctl_jtype_t t)
{
    switch (t) {
    case CTL_INT: return "a non-negative integer";
    case CTL_NUMBER: return "a non-negative number";
    case CTL_STRING: return "a non-empty string";
    case CTL_OBJECT: return "an object";
    case CTL_ARRAY: return "an array";
    case CTL_ANY_STRING: return "a string";
    }
    return "?";
}

static int matches(const json_t *v, ctl_jtype_t t)
{
    switch (t) {
    case CTL_INT: return json_is_integer(v) && json_integer_value(v) >= 0;
    case CTL_NUMBER: return json_is_number(v) && json_number_value(v) >= 0;
    case CTL_STRING: return json_is_string(v) && json_string_length(v) > 0;
    case CTL_OBJECT: return json_is_object(v);
    case CTL_ARRAY: return json_is_array(v);
    case CTL_ANY_STRING: return json_is_string(v);
    }
    return 0;
}

int ctl_validate(const json_t *body, const ctl_field_t *fields, size_t n, char *err, size_t errlen)
{
    size_t i;
    if (!json_is_object(body)) {
        snprintf(err, errlen, "the request body must be a JSON object");
        return 422;
    }
    for (i = 0; i < n; i++) {
        const json_t *v = json_object_get(body, fields[i].name);
        if (v == NULL || json_is_null(v)) {
            if (fields[i].required) {
                snprintf(err, errlen, "field '%s' is required (%s)", fields[i].name, type_name(fields[i].type));
                return 422;
            }
            continue;
        }
        if (!matches(v, fields[i].type)) {
            snprintf(err, errlen, "field '%s' must be %s", fields[i].name, type_name(fields[i].type));
            return 422;
        }
    }
    return 0;
}
