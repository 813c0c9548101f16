/* relay_registration_fuzz.c: libFuzzer target for the registration the
 * control endpoint parses from any engine node. Parsing fails with a
 * message, or gives a registration within its bounds that survives the
 * round trip unchanged. */
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/proto/relay_registration.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wsync_relay_registration_t r, back;
    json_t *j, *again;
    wsync_log_set_level(WSYNC_LOG_ERROR);
    j = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (j == NULL)
        return 0;
    if (wsync_relay_registration_from_json(j, &r) == WSYNC_OK) {
        if (!wsync_engine_id_ok(r.id) || r.local_ranks < 1 || r.local_ranks > WSYNC_REG_MAX_RANKS || r.host[0] == 0)
            abort();
        again = wsync_relay_registration_to_json(&r);
        if (again == NULL || wsync_relay_registration_from_json(again, &back) != WSYNC_OK ||
            strcmp(back.id, r.id) != 0 || strcmp(back.relay, r.relay) != 0 || back.holds != r.holds ||
            back.local_ranks != r.local_ranks)
            abort();
        wsync_relay_registration_clear(&back);
        json_decref(again);
        wsync_relay_registration_clear(&r);
    }
    json_decref(j);
    return 0;
}
