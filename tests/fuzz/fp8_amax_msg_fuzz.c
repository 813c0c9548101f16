/* fp8_amax_msg_fuzz.c: libFuzzer target for the FP8 block maxima request a
 * trainer rank parses from any peer on its pull port, and the answer the
 * asker parses. Parsing fails with a message, or gives parts within their
 * bounds that survive the round trip unchanged; an answer gives finite
 * maxima >= 0 only. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/proto/fp8_amax_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wsync_fp8_amax_req_t r, back;
    float amax[8];
    size_t i;
    json_t *j, *again;
    wsync_log_set_level(WSYNC_LOG_ERROR);
    j = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (j == NULL)
        return 0;
    if (wsync_fp8_amax_req_from_json(j, &r) == WSYNC_OK) {
        for (i = 0; i < r.nparts; i++)
            if (r.parts[i].block_rows < 1 || r.parts[i].block_rows > WSYNC_AMAX_MAX_BLOCK ||
                r.parts[i].block_cols < 1 || r.parts[i].block_cols > WSYNC_AMAX_MAX_BLOCK)
                abort();
        again = wsync_fp8_amax_req_to_json(&r);
        if (again == NULL || wsync_fp8_amax_req_from_json(json_object_get(again, "fp8_amax"), &back) != WSYNC_OK ||
            back.version != r.version || back.nparts != r.nparts ||
            memcmp(back.parts, r.parts, r.nparts * sizeof(*r.parts)) != 0)
            abort();
        wsync_fp8_amax_req_clear(&back);
        json_decref(again);
    }
    wsync_fp8_amax_req_clear(&r);
    for (i = 0; i <= 8; i++)
        if (wsync_fp8_amax_answer_get(j, amax, i) == WSYNC_OK) {
            size_t k;
            for (k = 0; k < i; k++)
                if (!isfinite(amax[k]) || amax[k] < 0.0f)
                    abort();
        }
    json_decref(j);
    return 0;
}
