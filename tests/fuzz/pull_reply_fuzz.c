/* pull_reply_fuzz.c: libFuzzer target for the pull reply an engine rank
 * parses from any trainer rank or relay. Whatever the JSON, parsing either
 * fails with a message naming the field or gives a reply that survives the
 * round trip unchanged. */
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/proto/pull_reply.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wsync_pull_reply_t r, back;
    json_t *j, *again;
    size_t k;
    wsync_log_set_level(WSYNC_LOG_ERROR);
    j = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (j == NULL)
        return 0;
    if (wsync_pull_reply_from_json(j, &r) == WSYNC_OK) {
        if (r.error[0] == '\0' && r.segments && r.nsegments != json_object_size(r.segments))
            abort();
        again = wsync_pull_reply_to_json(&r);
        if (again == NULL || wsync_pull_reply_from_json(again, &back) != WSYNC_OK ||
            strcmp(back.error, r.error) != 0 ||
            (r.error[0] == '\0' &&
             (back.pieces != r.pieces || back.bytes != r.bytes || back.nsegments != r.nsegments)))
            abort();
        for (k = 0; r.error[0] == '\0' && k < r.nsegments; k++)
            if (back.segment_ids[k] != r.segment_ids[k] || back.segment_digests[k] != r.segment_digests[k])
                abort();
        if (r.error[0] == '\0' && (back.has_base != r.has_base || back.base != r.base || back.ndeltas != r.ndeltas))
            abort();
        for (k = 0; r.error[0] == '\0' && k < r.ndeltas; k++)
            if (memcmp(&back.deltas[k], &r.deltas[k], sizeof(r.deltas[k])) != 0 ||
                r.deltas[k].at + r.deltas[k].bytes < r.deltas[k].at)
                abort();
        wsync_pull_reply_clear(&back);
        json_decref(again);
        wsync_pull_reply_clear(&r);
    } else if (r.segments != NULL || r.segment_ids != NULL || r.deltas != NULL) {
        abort(); /* a refused reply owns nothing */
    }
    json_decref(j);
    return 0;
}
