/* validate_test.c: every route's body schema at its edges. A body valid by
 * the schema is built from the schema itself; then each field in turn takes
 * each value of the hostile classes (0, -1, 2^31, 2^32, 2^63-1, -2^63, its
 * range's edges, strings, reals, bools, objects over their size): the bounds
 * pass, everything else is 422 naming the field. And the model takes the
 * values that crashed it or aliased (rank 2^31, 2^32, world 2^32+1,
 * local_ranks 2^31, version 2^63-1) as 422, never as a write. */
#include <math.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/log.h"
#include "tests/test.h"
#include "common/control/model.h"
#include "common/control/validate.h"

static const struct {
    const char *name;
    const ctl_schema_t *schema;
} schemas[] = {
    {"register_trainer", &ctl_req_register_trainer},
    {"register_engine", &ctl_req_register_engine},
    {"publish", &ctl_req_publish},
    {"report", &ctl_req_report},
    {"layout", &ctl_req_layout},
};

static json_t *valid_body(const ctl_schema_t *sc);

static json_t *valid_value(const ctl_field_t *f)
{
    switch (f->type) {
    case CTL_INT: return json_integer((json_int_t)f->min);
    case CTL_NUMBER: return json_real(f->min);
    case CTL_STRING: return json_string("a");
    case CTL_ANY_STRING: return json_string("");
    case CTL_OBJECT: return f->sub ? valid_body(f->sub) : json_object();
    case CTL_ARRAY: return json_pack("[o]", f->sub ? valid_body(f->sub) : json_object());
    }
    return json_null();
}

static json_t *valid_body(const ctl_schema_t *sc)
{
    json_t *b = json_object();
    size_t i;
    for (i = 0; i < sc->n; i++)
        json_object_set_new(b, sc->fields[i].name, valid_value(&sc->fields[i]));
    return b;
}

/* ctl_check of the valid body with field i set to v (stolen). */
static int check_with(const ctl_schema_t *sc, size_t i, json_t *v, char *err, size_t len)
{
    json_t *b = valid_body(sc);
    int code;
    json_object_set_new(b, sc->fields[i].name, v);
    err[0] = '\0';
    code = ctl_check(b, sc, err, len);
    json_decref(b);
    return code;
}

static int named(const char *err, const char *field)
{
    char want[80];
    snprintf(want, sizeof(want), "field '%s' must be", field);
    return strstr(err, want) != NULL;
}

static void test_every_field_at_its_edges(void)
{
    static const json_int_t hostile[] = {-1,
                                         (json_int_t)1 << 31,
                                         (json_int_t)1 << 32,
                                         ((json_int_t)1 << 32) + 1,
                                         (json_int_t)1 << 53,
                                         ((json_int_t)1 << 62) + 1,
                                         (json_int_t)9223372036854775807LL,
                                         (json_int_t)(-9223372036854775807LL - 1)};
    char err[512];
    size_t s, i, k;
    for (s = 0; s < WSYNC_ARRAY_LEN(schemas); s++) {
        const ctl_schema_t *sc = schemas[s].schema;
        json_t *b = valid_body(sc);
        CHECK_EQ(ctl_check(b, sc, err, sizeof(err)), 0);
        json_decref(b);
        for (i = 0; i < sc->n; i++) {
            const ctl_field_t *f = &sc->fields[i];
            if (f->type == CTL_INT) {
                CHECK_EQ(check_with(sc, i, json_integer((json_int_t)f->max), err, sizeof(err)), 0);
                CHECK_EQ(check_with(sc, i, json_integer((json_int_t)f->min), err, sizeof(err)), 0);
                CHECK_EQ(check_with(sc, i, json_integer((json_int_t)f->max + 1), err, sizeof(err)), 422);
                CHECK(named(err, f->name) && strstr(err, "an integer from"));
                CHECK_EQ(check_with(sc, i, json_integer((json_int_t)f->min - 1), err, sizeof(err)), 422);
                for (k = 0; k < WSYNC_ARRAY_LEN(hostile); k++) {
                    int in = hostile[k] >= (json_int_t)f->min && hostile[k] <= (json_int_t)f->max;
                    int code = check_with(sc, i, json_integer(hostile[k]), err, sizeof(err));
                    CHECK_EQ(code, in ? 0 : 422);
                    if (!in && !named(err, f->name))
                        fprintf(stderr, "  %s.%s = %lld: '%s'\n", schemas[s].name, f->name, (long long)hostile[k],
                                err),
                            test_case_failed_ = 1;
                }
                CHECK_EQ(check_with(sc, i, json_real(1.5), err, sizeof(err)), 422);
                CHECK_EQ(check_with(sc, i, json_real(1.0), err, sizeof(err)), 422);
                CHECK_EQ(check_with(sc, i, json_real(18446744073709551616.0), err, sizeof(err)), 422);
            }
            if (f->type == CTL_NUMBER) {
                CHECK_EQ(check_with(sc, i, json_real(f->max), err, sizeof(err)), 0);
                CHECK_EQ(check_with(sc, i, json_real(f->max * 2), err, sizeof(err)), 422);
                CHECK_EQ(check_with(sc, i, json_real(-1e-300), err, sizeof(err)), 422);
                CHECK(named(err, f->name) && strstr(err, "a finite number from"));
            }
            if (f->type != CTL_STRING && f->type != CTL_ANY_STRING) {
                CHECK_EQ(check_with(sc, i, json_string("1"), err, sizeof(err)), 422);
                CHECK(named(err, f->name));
            } else {
                CHECK_EQ(check_with(sc, i, json_integer(1), err, sizeof(err)), 422);
                CHECK(named(err, f->name));
            }
            CHECK_EQ(check_with(sc, i, json_true(), err, sizeof(err)), 422);
            CHECK(named(err, f->name));
            if (f->type == CTL_STRING && f->max > 0) {
                char longer[4200];
                memset(longer, 'x', sizeof(longer));
                longer[(size_t)f->max + 1] = '\0';
                CHECK_EQ(check_with(sc, i, json_string(longer), err, sizeof(err)), 422);
                longer[(size_t)f->max] = '\0';
                CHECK_EQ(check_with(sc, i, json_string(longer), err, sizeof(err)), 0);
            }
            if (f->required) {
                CHECK_EQ(check_with(sc, i, json_null(), err, sizeof(err)), 422);
                CHECK(strstr(err, "is required") != NULL);
            }
        }
    }
}

static void test_nested_fields_are_named(void)
{
    char err[512];
    json_t *b = valid_body(&ctl_req_publish), *pieces = json_object_get(b, "pieces");
    json_array_append_new(pieces, json_pack("{s:i, s:I, s:i}", "id", 1, "offset", (json_int_t)1 << 32, "len", -1));
    CHECK_EQ(ctl_check(b, &ctl_req_publish, err, sizeof(err)), 422);
    CHECK(strstr(err, "field 'pieces[1].len' must be an integer from 0 to") != NULL);
    json_object_set_new(json_object_get(b, "layout"), "world", json_integer((json_int_t)1 << 32));
    CHECK_EQ(ctl_check(b, &ctl_req_publish, err, sizeof(err)), 422);
    CHECK(strstr(err, "field 'layout.world' must be an integer from 1 to 4096") != NULL);
    json_decref(b);
}

static void test_endpoint_object_has_a_size_limit(void)
{
    char err[512], big[CTL_MAX_ENDPOINT + 16];
    json_t *b = valid_body(&ctl_req_register_engine);
    memset(big, 'a', sizeof(big));
    big[sizeof(big) - 1] = '\0';
    json_object_set_new(b, "endpoint", json_pack("{s:s}", "x", big));
    CHECK_EQ(ctl_check(b, &ctl_req_register_engine, err, sizeof(err)), 422);
    CHECK(strstr(err, "field 'endpoint' must be an object of at most 4096 bytes") != NULL);
    big[CTL_MAX_ENDPOINT - 16] = '\0';
    json_object_set_new(b, "endpoint", json_pack("{s:s}", "x", big));
    CHECK_EQ(ctl_check(b, &ctl_req_register_engine, err, sizeof(err)), 0);
    json_decref(b);
}

static void test_version_bound_says_what_to_do(void)
{
    char err[512];
    json_t *b = valid_body(&ctl_req_publish);
    json_object_set_new(b, "version", json_integer((json_int_t)9223372036854775807LL));
    CHECK_EQ(ctl_check(b, &ctl_req_publish, err, sizeof(err)), 422);
    CHECK(strstr(err, "from 1 to 9007199254740991") != NULL);
    CHECK(strstr(err, "fresh state file") != NULL);
    json_object_set_new(b, "version", json_integer(CTL_MAX_VERSION));
    CHECK_EQ(ctl_check(b, &ctl_req_publish, err, sizeof(err)), 0);
    json_decref(b);
}

/* The values that crashed or aliased in the model before the table held
 * ranges: each is 422, and the model is unchanged. */
static void test_model_refuses_what_crashed(void)
{
    ctl_model_t m;
    char err[512];
    int changed = 0;
    json_t *b;
    ctl_model_init(&m);
    b = json_pack("{s:I, s:i, s:s, s:{}}", "rank", (json_int_t)1 << 31, "world", 1, "host", "h", "endpoint");
    CHECK_EQ(ctl_register_trainer(&m, b, err, sizeof(err), &changed), 422);
    json_decref(b);
    b = json_pack("{s:I, s:I, s:s, s:{}}", "rank", (json_int_t)1 << 32, "world", ((json_int_t)1 << 32) + 1, "host",
                  "h", "endpoint");
    CHECK_EQ(ctl_register_trainer(&m, b, err, sizeof(err), &changed), 422);
    json_decref(b);
    b = json_pack("{s:I, s:i, s:s, s:{}}", "rank", (json_int_t)9223372036854775807LL, "world", 1, "host", "h",
                  "endpoint");
    CHECK_EQ(ctl_register_trainer(&m, b, err, sizeof(err), &changed), 422);
    json_decref(b);
    b = json_pack("{s:s, s:s, s:I}", "id", "n", "host", "h", "local_ranks", (json_int_t)1 << 31);
    CHECK_EQ(ctl_register_engine(&m, b, err, sizeof(err), &changed), 422);
    json_decref(b);
    CHECK_EQ(changed, 0);
    CHECK_EQ(m.world, 0);
    CHECK_EQ(m.nengines, 0);
    ctl_model_free(&m);
}

/* A report of 1e-300 s made the rate infinite and the engine vanished from
 * /v1/status; now the rate is 0 and the entry is there. */
static void test_tiny_duration_keeps_the_engine_in_status(void)
{
    ctl_model_t m;
    char err[512];
    int changed = 0;
    json_t *b, *st, *e;
    ctl_model_init(&m);
    b = json_pack("{s:s, s:s, s:i}", "id", "n", "host", "h", "local_ranks", 1);
    CHECK_EQ(ctl_register_engine(&m, b, err, sizeof(err), &changed), 200);
    json_decref(b);
    m.latest = 1;
    b = json_pack("{s:i, s:s, s:f, s:I}", "version", 1, "state", "ready", "duration_s", 1e-300, "bytes",
                  (json_int_t)1 << 40);
    CHECK_EQ(ctl_report(&m, "n", b, err, sizeof(err), &changed), 200);
    json_decref(b);
    st = ctl_status_json(&m);
    e = json_array_get(json_object_get(st, "engines"), 0);
    CHECK_EQ(json_array_size(json_object_get(st, "engines")), 1);
    CHECK(e != NULL && isfinite(json_number_value(json_object_get(e, "last_gbps"))));
    json_decref(st);
    ctl_model_free(&m);
}

int main(void)
{
    wsync_log_set_level(WSYNC_LOG_ERROR);
    RUN(test_every_field_at_its_edges);
    RUN(test_nested_fields_are_named);
    RUN(test_endpoint_object_has_a_size_limit);
    RUN(test_version_bound_says_what_to_do);
    RUN(test_model_refuses_what_crashed);
    RUN(test_tiny_duration_keeps_the_engine_in_status);
    TEST_EXIT();
}
