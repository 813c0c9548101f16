/* links_json_fuzz.c: libFuzzer target for the links file reader (a file a
 * person edits or `wsync calibrate` writes): whatever the bytes, reading
 * fails with a message or gives links that survive their own round trip and
 * cost a small deployment to finite, positive times, or fail naming the
 * class they lack. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/cost/cost.h"
#include "common/base/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cost_links_t l, back;
    cost_deploy_t d;
    cost_plan_t plans[COST_MAX_PLANS];
    size_t n = 0, i;
    json_t *j;
    char *text;
    wsync_log_set_level(WSYNC_LOG_ERROR);
    if (cost_links_parse((const char *)data, size, "fuzz", &l) != WSYNC_OK) {
        if (wsync_last_error()[0] == '\0')
            abort(); /* a refusal always says why */
        return 0;
    }
    j = cost_links_to_json(&l);
    text = json_dumps(j, 0);
    if (text == NULL || cost_links_parse(text, strlen(text), "round trip", &back) != WSYNC_OK)
        abort();
    for (i = 0; i < COST_CLASS_COUNT; i++)
        if (back.link[i].present != l.link[i].present)
            abort();
    free(text);
    json_decref(j);
    cost_deploy_init(&d, 4, 1, 3, 2, 1ull << 30, 64ull << 20, COST_MEM_GPU, COST_NET_PUT);
    if (cost_predict(&l, &d, plans, COST_MAX_PLANS, &n) == WSYNC_OK)
        for (i = 0; i < n; i++)
            if (!isfinite(plans[i].predicted_s) || plans[i].predicted_s < 0)
                abort();
    return 0;
}
