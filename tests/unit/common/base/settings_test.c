/* settings_test.c: the settings table: parsing of each type, range checks
 * that name the setting, and the order flag > environment > file > default. */
#include <stdlib.h>

#include "common/base/fault.h"
#include "common/base/settings.h"
#include "tests/test.h"

static void clear_env(void)
{
    int i;
    for (i = 0; i < WSYNC_SET_COUNT; i++)
        unsetenv(wsync_setting_def((wsync_setting_id_t)i)->env);
    for (i = 0; i < WSYNC_FAULT_COUNT; i++)
        unsetenv(wsync_fault_def((wsync_fault_id_t)i)->env);
}

static void every_default_parses_and_lies_in_its_range(void)
{
    int i;
    for (i = 0; i < WSYNC_SET_COUNT; i++) {
        const wsync_setting_def_t *d = wsync_setting_def((wsync_setting_id_t)i);
        long long v = 0;
        CHECK_OK(wsync_setting_parse(d, d->dflt, "test", &v));
        CHECK(d->name && d->env && d->doc && d->doc[0]);
        CHECK_EQ(wsync_setting_find(d->name), i);
        CHECK(strncmp(d->env, "WSYNC_", 6) == 0 && strncmp(d->env, "WSYNC_TEST_", 11) != 0);
    }
    CHECK_OK(wsync_settings_reload());
    CHECK_EQ(wsync_setting_int(WSYNC_SET_CONNECT_TIMEOUT_MS), 10000);
    CHECK_EQ(wsync_setting_source(WSYNC_SET_CONNECT_TIMEOUT_MS), WSYNC_SRC_DEFAULT);
    CHECK_EQ(wsync_setting_int(WSYNC_SET_LOCAL_TRANSPORT), 1);
    CHECK_STR(wsync_setting_str(WSYNC_SET_HOST_ID), "");
}

static void each_type_parses_its_forms(void)
{
    const wsync_setting_def_t *ms = wsync_setting_def(WSYNC_SET_CONNECT_TIMEOUT_MS),
                              *b = wsync_setting_def(WSYNC_SET_TRACE), *e = wsync_setting_def(WSYNC_SET_LOG),
                              *n = wsync_setting_def(WSYNC_SET_IB_GID_INDEX);
    long long v = 0;
    CHECK_OK(wsync_setting_parse(ms, "250", "t", &v));
    CHECK_EQ(v, 250);
    CHECK_OK(wsync_setting_parse(ms, "250ms", "t", &v));
    CHECK_EQ(v, 250);
    CHECK_OK(wsync_setting_parse(ms, "10s", "t", &v));
    CHECK_EQ(v, 10000);
    CHECK_OK(wsync_setting_parse(ms, "2m", "t", &v));
    CHECK_EQ(v, 120000);
    CHECK_FAILS(wsync_setting_parse(ms, "10 s", "t", &v), WSYNC_ERR_INVALID, "connect_timeout_ms");
    CHECK_FAILS(wsync_setting_parse(ms, "0", "t", &v), WSYNC_ERR_INVALID, "1..3600000 ms");
    CHECK_OK(wsync_setting_parse(b, "yes", "t", &v));
    CHECK_EQ(v, 1);
    CHECK_OK(wsync_setting_parse(b, "OFF", "t", &v));
    CHECK_EQ(v, 0);
    CHECK_FAILS(wsync_setting_parse(b, "2", "t", &v), WSYNC_ERR_INVALID, "true/false");
    CHECK_OK(wsync_setting_parse(e, "debug", "t", &v));
    CHECK_EQ(v, 3);
    CHECK_FAILS(wsync_setting_parse(e, "verbose", "t", &v), WSYNC_ERR_INVALID, "error|warn|info|debug");
    CHECK_OK(wsync_setting_parse(n, "-1", "t", &v));
    CHECK_EQ(v, -1);
    CHECK_FAILS(wsync_setting_parse(n, "3x", "t", &v), WSYNC_ERR_INVALID, "does not parse");
    CHECK_FAILS(wsync_setting_parse(n, "256", "t", &v), WSYNC_ERR_INVALID, "-1..255");
}

static void a_bad_variable_is_refused_naming_setting_variable_and_range(void)
{
    setenv("WSYNC_TCP_CONNS", "99", 1);
    CHECK_FAILS(wsync_settings_reload(), WSYNC_ERR_INVALID, "setting tcp_conns = '99'");
    CHECK_FAILS(wsync_settings_init(), WSYNC_ERR_INVALID, "WSYNC_TCP_CONNS");
    CHECK_FAILS(wsync_settings_init(), WSYNC_ERR_INVALID, "1..16");
    /* Nothing changed: all or nothing. */
    CHECK_EQ(wsync_setting_int(WSYNC_SET_TCP_CONNS), 4);
    unsetenv("WSYNC_TCP_CONNS");
    CHECK_OK(wsync_settings_reload());
    setenv("WSYNC_IB_DEVICES", "mlx5_0:300", 1);
    CHECK_FAILS(wsync_settings_reload(), WSYNC_ERR_INVALID, "ib_devices");
    unsetenv("WSYNC_IB_DEVICES");
    setenv("WSYNC_TEST_LAND_DELAY_MS", "soon", 1);
    CHECK_FAILS(wsync_settings_reload(), WSYNC_ERR_INVALID, "WSYNC_TEST_LAND_DELAY_MS");
    unsetenv("WSYNC_TEST_LAND_DELAY_MS");
    CHECK_OK(wsync_settings_reload());
    CHECK_EQ(wsync_fault(WSYNC_FAULT_LAND_DELAY_MS), 0);
}

static void flag_beats_environment_beats_file_beats_default(void)
{
    json_error_t je;
    json_t *file = json_loads("{\"tcp_conns\": 2, \"host_id\": \"from-file\", \"trace\": true, "
                              "\"nccl_op_timeout_ms\": \"30s\"}",
                              0, &je);
    CHECK_OK(wsync_settings_load_json(file, "test.json"));
    CHECK_EQ(wsync_setting_int(WSYNC_SET_TCP_CONNS), 2);
    CHECK_EQ(wsync_setting_source(WSYNC_SET_TCP_CONNS), WSYNC_SRC_FILE);
    CHECK_EQ(wsync_setting_int(WSYNC_SET_TRACE), 1);
    CHECK_EQ(wsync_setting_int(WSYNC_SET_NCCL_OP_TIMEOUT_MS), 30000);
    setenv("WSYNC_TCP_CONNS", "3", 1);
    CHECK_OK(wsync_settings_reload());
    CHECK_EQ(wsync_setting_int(WSYNC_SET_TCP_CONNS), 3);
    CHECK_EQ(wsync_setting_source(WSYNC_SET_TCP_CONNS), WSYNC_SRC_ENV);
    CHECK_OK(wsync_settings_set_flag("tcp_conns", "5"));
    CHECK_EQ(wsync_setting_int(WSYNC_SET_TCP_CONNS), 5);
    CHECK_EQ(wsync_setting_source(WSYNC_SET_TCP_CONNS), WSYNC_SRC_FLAG);
    CHECK_STR(wsync_setting_str(WSYNC_SET_HOST_ID), "from-file");
    {
        char id[64];
        wsync_host_id("given", id, sizeof(id));
        CHECK_STR(id, "given");
        wsync_host_id(NULL, id, sizeof(id));
        CHECK_STR(id, "from-file");
    }
    CHECK_FAILS(wsync_settings_set_flag("tcp_connz", "5"), WSYNC_ERR_INVALID, "not a setting");
    unsetenv("WSYNC_TCP_CONNS");
    json_decref(file);
}

static void a_file_with_an_unknown_or_bad_value_is_refused(void)
{
    json_error_t je;
    json_t *a = json_loads("{\"tcp_port\": 99999}", 0, &je), *b = json_loads("{\"tcp_prot\": 1}", 0, &je),
           *c = json_loads("{\"tcp_port\": [1]}", 0, &je);
    CHECK_FAILS(wsync_settings_load_json(a, "a.json"), WSYNC_ERR_INVALID, "config file a.json");
    CHECK_FAILS(wsync_settings_load_json(b, "b.json"), WSYNC_ERR_INVALID, "settings.tcp_prot is not a setting");
    CHECK_FAILS(wsync_settings_load_json(c, "c.json"), WSYNC_ERR_FORMAT, "string, number or boolean");
    /* ... and leaves the settings as they were. */
    CHECK_OK(wsync_settings_init());
    CHECK_EQ(wsync_setting_int(WSYNC_SET_TCP_PORT), 0);
    json_decref(a);
    json_decref(b);
    json_decref(c);
}

int main(void)
{
    clear_env();
    RUN(every_default_parses_and_lies_in_its_range);
    RUN(each_type_parses_its_forms);
    RUN(a_bad_variable_is_refused_naming_setting_variable_and_range);
    RUN(flag_beats_environment_beats_file_beats_default);
    RUN(a_file_with_an_unknown_or_bad_value_is_refused);
    TEST_EXIT();
}
