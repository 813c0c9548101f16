/* validate.c: every route's body schema, and the one validator for them. */
#include "common/control/validate.h"

#include <math.h>
#include <stdio.h>

#include "common/base/checks.h"
#include "common/control/model.h"

#define F(name, type, req, lo, hi)          \
    {                                       \
        name, type, req, lo, hi, NULL, NULL \
    }
#define RANK_MAX (CTL_MAX_WORLD - 1)
#define VERSION_HINT                                                                               \
    "; versions are bounded (docs/API.md): to go on, number again from 1 with a fresh state file " \
    "(stop wsync serve, move its --state file aside, start it, restart trainers and engines)"

static const ctl_field_t trainer_fields[] = {
    F("rank", CTL_INT, 1, 0, RANK_MAX),
    F("world", CTL_INT, 1, 1, CTL_MAX_WORLD),
    F("host", CTL_STRING, 1, 0, CTL_MAX_NAME),
    F("endpoint", CTL_OBJECT, 1, 0, CTL_MAX_ENDPOINT),
};
const ctl_schema_t ctl_req_register_trainer = {trainer_fields, WSYNC_ARRAY_LEN(trainer_fields)};

static const ctl_field_t engine_fields[] = {
    F("id", CTL_STRING, 1, 0, CTL_MAX_NAME),
    F("host", CTL_STRING, 1, 0, CTL_MAX_NAME),
    F("local_ranks", CTL_INT, 1, 1, CTL_MAX_WORLD),
    F("endpoint", CTL_OBJECT, 0, 0, CTL_MAX_ENDPOINT),
    F("holds", CTL_INT, 0, 0, (double)CTL_MAX_VERSION),
};
const ctl_schema_t ctl_req_register_engine = {engine_fields, WSYNC_ARRAY_LEN(engine_fields)};

static const ctl_field_t layout_fields[] = {
    F("manifest_digest", CTL_STRING, 1, 0, CTL_MAX_NAME),
    F("chunk_size", CTL_INT, 1, 1, (double)(1ULL << 40)),
    F("layout", CTL_STRING, 1, 0, CTL_MAX_NAME),
    F("layout_digest", CTL_STRING, 1, 0, CTL_MAX_NAME),
    F("image_size", CTL_INT, 1, 0, (double)CTL_MAX_BYTES),
    F("world", CTL_INT, 1, 1, CTL_MAX_WORLD),
    F("manifest", CTL_OBJECT, 0, 0, 0),
};
static const ctl_schema_t layout_schema = {layout_fields, WSYNC_ARRAY_LEN(layout_fields)};

static const ctl_field_t piece_fields[] = {
    F("id", CTL_INT, 1, 0, 2147483647.0), F("offset", CTL_INT, 1, 0, (double)CTL_MAX_BYTES),
    F("len", CTL_INT, 1, 0, (double)CTL_MAX_BYTES),
    F("digest", CTL_STRING, 0, 0, CTL_MAX_NAME), /* absent: to follow */
};
static const ctl_schema_t piece_schema = {piece_fields, WSYNC_ARRAY_LEN(piece_fields)};

static const ctl_field_t publish_fields[] = {
    F("rank", CTL_INT, 1, 0, RANK_MAX),
    F("world", CTL_INT, 1, 1, CTL_MAX_WORLD),
    {"version", CTL_INT, 1, 1, (double)CTL_MAX_VERSION, NULL, VERSION_HINT},
    {"layout", CTL_OBJECT, 1, 0, 0, &layout_schema, NULL},
    {"pieces", CTL_ARRAY, 1, 0, 0, &piece_schema, NULL},
};
const ctl_schema_t ctl_req_publish = {publish_fields, WSYNC_ARRAY_LEN(publish_fields)};

static const ctl_field_t report_fields[] = {
    F("version", CTL_INT, 1, 0, (double)CTL_MAX_VERSION),
    F("state", CTL_STRING, 1, 0, 15),
    F("duration_s", CTL_NUMBER, 0, 0, CTL_MAX_DURATION_S),
    F("bytes", CTL_INT, 0, 0, (double)CTL_MAX_BYTES),
    F("error", CTL_ANY_STRING, 0, 0, 0),
    F("phase", CTL_STRING, 0, 0, 15),
    F("total", CTL_INT, 0, 0, (double)CTL_MAX_BYTES),
    F("holds", CTL_INT, 0, 0, (double)CTL_MAX_VERSION),
    F("node", CTL_ANY_STRING, 0, 0, 512),
    F("delta", CTL_OBJECT, 0, 0, 512),
};
const ctl_schema_t ctl_req_report = {report_fields, WSYNC_ARRAY_LEN(report_fields)};

static const ctl_field_t layout_post_fields[] = {F("manifest", CTL_OBJECT, 1, 0, 0)};
const ctl_schema_t ctl_req_layout = {layout_post_fields, WSYNC_ARRAY_LEN(layout_post_fields)};

/* What the field must be, e.g. "an integer from 0 to 4095". */
static void describe(const ctl_field_t *f, char *out, size_t len)
{
    switch (f->type) {
    case CTL_INT: snprintf(out, len, "an integer from %.0f to %.0f", f->min, f->max); return;
    case CTL_NUMBER: snprintf(out, len, "a finite number from %g to %g", f->min, f->max); return;
    case CTL_STRING:
        if (f->max > 0)
            snprintf(out, len, "a non-empty string of at most %.0f bytes", f->max);
        else
            snprintf(out, len, "a non-empty string");
        return;
    case CTL_ANY_STRING: snprintf(out, len, "a string"); return;
    case CTL_OBJECT:
        if (f->max > 0)
            snprintf(out, len, "an object of at most %.0f bytes as JSON", f->max);
        else
            snprintf(out, len, "an object");
        return;
    case CTL_ARRAY: snprintf(out, len, "an array"); return;
    }
    snprintf(out, len, "?");
}

static int matches(const json_t *v, const ctl_field_t *f)
{
    switch (f->type) {
    /* Compared as integers: 2^62 + 1 is not 2^62, as it would be as a double. */
    case CTL_INT:
        return json_is_integer(v) && json_integer_value(v) >= (json_int_t)f->min &&
               json_integer_value(v) <= (json_int_t)f->max;
    case CTL_NUMBER:
        return json_is_number(v) && isfinite(json_number_value(v)) && json_number_value(v) >= f->min &&
               json_number_value(v) <= f->max;
    case CTL_STRING:
        return json_is_string(v) && json_string_length(v) > 0 && (f->max <= 0 || json_string_length(v) <= f->max);
    case CTL_ANY_STRING: return json_is_string(v) && (f->max <= 0 || json_string_length(v) <= f->max);
    case CTL_OBJECT:
        /* json_dumpb with no buffer only measures. */
        return json_is_object(v) && (f->max <= 0 || json_dumpb(v, NULL, 0, JSON_COMPACT) <= f->max);
    case CTL_ARRAY: return json_is_array(v) && (f->max <= 0 || json_array_size(v) <= f->max);
    }
    return 0;
}

static int check_in(const json_t *body, const ctl_schema_t *schema, const char *prefix, char *err, size_t errlen)
{
    char name[160], what[96];
    size_t i, k;
    if (!json_is_object(body)) {
        if (prefix[0])
            snprintf(err, errlen, "field '%s' must be an object", prefix);
        else
            snprintf(err, errlen, "the request body must be a JSON object");
        return 422;
    }
    for (i = 0; i < schema->n; i++) {
        const ctl_field_t *f = &schema->fields[i];
        const json_t *v = json_object_get(body, f->name), *item;
        snprintf(name, sizeof(name), "%s%s%s", prefix, prefix[0] ? "." : "", f->name);
        describe(f, what, sizeof(what));
        if (v == NULL || json_is_null(v)) {
            if (!f->required)
                continue;
            snprintf(err, errlen, "field '%s' is required (%s)", name, what);
            return 422;
        }
        if (!matches(v, f)) {
            snprintf(err, errlen, "field '%s' must be %s%s", name, what,
                     f->hint && json_is_integer(v) && json_integer_value(v) > (json_int_t)f->max ? f->hint : "");
            return 422;
        }
        if (f->sub == NULL)
            continue;
        if (f->type == CTL_OBJECT) {
            int code = check_in(v, f->sub, name, err, errlen);
            if (code)
                return code;
            continue;
        }
        json_array_foreach(v, k, item)
        {
            char iname[192];
            int code;
            snprintf(iname, sizeof(iname), "%s[%zu]", name, k);
            if ((code = check_in(item, f->sub, iname, err, errlen)) != 0)
                return code;
        }
    }
    return 0;
}

int ctl_check(const json_t *body, const ctl_schema_t *schema, char *err, size_t errlen)
{
    return check_in(body, schema, "", err, errlen);
}
