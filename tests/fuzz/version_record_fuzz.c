/* version_record_fuzz.c: libFuzzer target for the version record an engine
 * rank parses from the control endpoint (and the endpoint from its state
 * file). Whatever the bytes, parsing fails with a message, or gives a record
 * within its bounds that survives the round trip unchanged. */
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/proto/version_record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wsync_version_record_t r, back;
    json_t *j, *again;
    size_t i;
    wsync_log_set_level(WSYNC_LOG_ERROR);
    j = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (j == NULL)
        return 0;
    if (wsync_version_record_from_json(j, &r) == WSYNC_OK) {
        if (r.version == 0 || r.world < 1 || r.chunk_size == 0 || r.digests_pending > r.npieces ||
            r.ntrainers > r.world)
            abort();
        for (i = 0; i < r.npieces; i++)
            if (r.pieces[i].rank < 0 || r.pieces[i].rank >= r.world || (i && r.pieces[i].id < r.pieces[i - 1].id))
                abort();
        again = wsync_version_record_to_json(&r);
        if (again == NULL || wsync_version_record_from_json(again, &back) != WSYNC_OK ||
            back.version != r.version || back.npieces != r.npieces || back.ntrainers != r.ntrainers ||
            back.digests_pending != r.digests_pending ||
            memcmp(back.pieces, r.pieces, r.npieces * sizeof(*r.pieces)) != 0 ||
            strcmp(back.layout_digest, r.layout_digest) != 0)
            abort();
        wsync_version_record_clear(&back);
        json_decref(again);
        wsync_version_record_clear(&r);
    }
    json_decref(j);
    return 0;
}
