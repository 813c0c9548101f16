/* control_body_fuzz.c: libFuzzer target for request bodies of the control
 * endpoint. The first byte picks the route (register trainer, register
 * engine, publish, report, layout under the body's "digest"); the rest is the body, applied to a model that
 * already holds an engine and a published version. Whatever the body, the
 * model must keep its invariants: the version never goes back, the status
 * and state render, and the state loads back into a fresh model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/control/model.h"

static void seed(ctl_model_t *m)
{
    static const char *eng = "{\"id\":\"e1\",\"host\":\"h\",\"local_ranks\":2}";
    static const char *pub = "{\"rank\":0,\"world\":1,\"version\":3,\"layout\":{\"manifest_digest\":\"ab\","
                             "\"chunk_size\":4,\"layout\":\"even\",\"layout_digest\":\"cd\",\"image_size\":8,"
                             "\"world\":1,\"manifest\":{}},\"pieces\":[{\"id\":0,\"offset\":0,\"len\":8,"
                             "\"digest\":\"00\"}]}";
    json_t *e = json_loads(eng, 0, NULL), *p = json_loads(pub, 0, NULL), *reply = NULL;
    char err[256];
    int changed = 0;
    if (ctl_register_engine(m, e, err, sizeof(err), &changed) != 200 ||
        ctl_publish(m, p, &reply, err, sizeof(err), &changed) != 200)
        abort();
    json_decref(reply);
    json_decref(e);
    json_decref(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ctl_model_t m, back;
    json_error_t jerr;
    json_t *body, *reply = NULL, *st, *state;
    char err[512];
    int changed = 0, code = 0;
    uint64_t before;

    if (size < 1)
        return 0;
    wsync_log_set_level(WSYNC_LOG_ERROR);
    body = json_loadb((const char *)data + 1, size - 1, JSON_REJECT_DUPLICATES, &jerr);
    if (body == NULL || !json_is_object(body)) { /* the server answers 400 before the model */
        json_decref(body);
        return 0;
    }
    ctl_model_init(&m);
    seed(&m);
    before = ctl_latest(&m);
    switch (data[0] % 5) {
    case 0: code = ctl_register_trainer(&m, body, err, sizeof(err), &changed); break;
    case 1: code = ctl_register_engine(&m, body, err, sizeof(err), &changed); break;
    case 2: code = ctl_publish(&m, body, &reply, err, sizeof(err), &changed); break;
    case 3: code = ctl_report(&m, "e1", body, err, sizeof(err), &changed); break;
    case 4: {
        const char *d = json_string_value(json_object_get(body, "digest"));
        code = ctl_put_layout(&m, d ? d : "", body, &reply, err, sizeof(err), &changed);
        break;
    }
    }
    if (code < 200 || code > 599 || ctl_latest(&m) < before)
        abort();
    if (code >= 400 && err[0] == '\0') /* every refusal says why */
        abort();
    st = ctl_status_json(&m);
    {
        char *text = st ? json_dumps(st, 0) : NULL;
        if (text == NULL)
            abort();
        free(text);
    }
    json_decref(st);
    state = ctl_state_json(&m);
    ctl_model_init(&back);
    if (state == NULL || ctl_state_load(&back, state, "fuzz") != WSYNC_OK || ctl_latest(&back) != ctl_latest(&m))
        abort();
    ctl_model_free(&back);
    json_decref(state);
    json_decref(reply);
    json_decref(body);
    ctl_model_free(&m);
    return 0;
}
