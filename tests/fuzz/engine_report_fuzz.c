/* engine_report_fuzz.c: libFuzzer target for the report the control
 * endpoint parses from any engine node. Parsing fails with a message, or
 * gives a report within its bounds that survives the round trip. */
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/proto/engine_report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wsync_engine_report_t r, back;
    json_t *j, *again;
    wsync_log_set_level(WSYNC_LOG_ERROR);
    j = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (j == NULL)
        return 0;
    if (wsync_engine_report_from_json(j, &r) == WSYNC_OK) {
        if ((unsigned)r.state > WSYNC_REPORT_EXITED || (r.phase && r.state != WSYNC_REPORT_PULLING) ||
            !(r.duration_s >= 0 && r.duration_s <= WSYNC_REPORT_MAX_DURATION_S) ||
            strlen(r.error) >= sizeof(r.error) || strlen(r.node) >= sizeof(r.node))
            abort();
        again = wsync_engine_report_to_json(&r);
        if (again == NULL || wsync_engine_report_from_json(again, &back) != WSYNC_OK ||
            back.version != r.version || back.state != r.state || back.phase != r.phase || back.holds != r.holds ||
            back.has_error != r.has_error || strcmp(back.error, r.error) != 0 || back.has_delta != r.has_delta ||
            memcmp(&back.delta, &r.delta, sizeof(r.delta)) != 0 || r.delta.wire_bytes > r.delta.piece_bytes)
            abort();
        json_decref(again);
    }
    json_decref(j);
    return 0;
}
