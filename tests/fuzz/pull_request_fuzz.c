/* pull_request_fuzz.c: libFuzzer target for the pull request a trainer rank
 * parses from any engine. The first two bytes give the plan's chunk count,
 * the rest is the JSON. Whatever it is, parsing either fails with a message
 * or gives a request within its bounds that survives the round trip (with
 * targets the chunk map is checked against the node plan later, by
 * wsync_pull_request_check_chunks). */
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/proto/pull_request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wsync_pull_request_t r, back;
    uint32_t nchunks;
    json_t *j, *again;
    if (size < 2)
        return 0;
    wsync_log_set_level(WSYNC_LOG_ERROR);
    nchunks = (uint32_t)data[0] | (uint32_t)data[1] << 8;
    j = json_loadb((const char *)data + 2, size - 2, JSON_DECODE_ANY, NULL);
    if (j == NULL)
        return 0;
    if (wsync_pull_request_from_json(j, nchunks, &r) == WSYNC_OK) {
        if (r.version == 0 || r.local_rank < 0 || r.local_rank >= r.local_ranks || r.req == 0 ||
            (r.chunks && r.ntargets == 0 && r.chunk_bytes != ((size_t)nchunks + 7) / 8) || strlen(r.engine) == 0 ||
            r.base >= r.version || r.delta_at + r.delta_bytes < r.delta_at)
            abort();
        again = wsync_pull_request_to_json(&r);
        if (again == NULL || wsync_pull_request_from_json(again, nchunks, &back) != WSYNC_OK ||
            back.version != r.version || back.req != r.req || back.local_rank != r.local_rank ||
            back.addr.len != r.addr.len || memcmp(back.addr.data, r.addr.data, r.addr.len) != 0 ||
            back.chunk_bytes != r.chunk_bytes || (r.chunks && memcmp(back.chunks, r.chunks, r.chunk_bytes) != 0) ||
            back.base != r.base || back.delta_at != r.delta_at || back.delta_bytes != r.delta_bytes ||
            back.delta_key.len != r.delta_key.len || back.in_order != r.in_order ||
            back.no_segment_digests != r.no_segment_digests ||
            memcmp(back.delta_key.data, r.delta_key.data, r.delta_key.len) != 0)
            abort();
        wsync_pull_request_clear(&back);
        json_decref(again);
        wsync_pull_request_clear(&r);
    }
    json_decref(j);
    return 0;
}
