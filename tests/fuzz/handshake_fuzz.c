/* handshake_fuzz.c: libFuzzer target for the data-plane handshake's parsers
 * and the server's judgement, which every peer that reaches a port can feed.
 * The input is a challenge (40 bytes), a hello (80), then the payload; the
 * same bytes are also read as a finish. Invariants: a decoded message
 * encodes back to the same bytes; with a token, a hello is accepted exactly
 * when its proof is the one recomputed here; without one, whenever it
 * decodes and names the port's purpose. */
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/net/handshake.h"

static void round_trips(const uint8_t *data, size_t size)
{
    unsigned char b[WSYNC_HS_HELLO_LEN];
    wsync_hs_challenge_t c;
    wsync_hs_hello_t h;
    wsync_hs_finish_t f;
    if (wsync_hs_challenge_decode(data, size, &c) == WSYNC_OK) {
        wsync_hs_challenge_encode(&c, b);
        if (memcmp(b, data, WSYNC_HS_CHALLENGE_LEN) != 0)
            abort();
    }
    if (wsync_hs_hello_decode(data, size, &h) == WSYNC_OK) {
        wsync_hs_hello_encode(&h, b);
        if (memcmp(b, data, WSYNC_HS_HELLO_LEN) != 0)
            abort();
    }
    if (wsync_hs_finish_decode(data, size, &f) == WSYNC_OK) {
        if (f.msg_len > WSYNC_HS_MSG_MAX || f.status > 0)
            abort();
        wsync_hs_finish_encode(&f, b);
        if (memcmp(b, data, WSYNC_HS_FINISH_LEN) != 0)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static wsync_auth_t token, none;
    static int ready;
    const unsigned char *ch = data, *hello = data + WSYNC_HS_CHALLENGE_LEN;
    const unsigned char *payload = hello + WSYNC_HS_HELLO_LEN;
    unsigned char key[WSYNC_AUTH_KEY_LEN], want[WSYNC_AUTH_MAC_LEN];
    size_t plen;
    wsync_hs_hello_t h;
    char why[WSYNC_HS_MSG_MAX];
    wsync_status_t with, without;
    int p, decoded;

    if (!ready) {
        wsync_log_set_level(WSYNC_LOG_ERROR);
        wsync_auth_init(&token, "fuzz-token");
        wsync_auth_init(&none, "");
        ready = 1;
    }
    round_trips(data, size);
    if (size < WSYNC_HS_CHALLENGE_LEN + WSYNC_HS_HELLO_LEN)
        return 0;
    round_trips(hello, size - WSYNC_HS_CHALLENGE_LEN);
    decoded = wsync_hs_hello_decode(hello, WSYNC_HS_HELLO_LEN, &h) == WSYNC_OK;
    plen = size - WSYNC_HS_CHALLENGE_LEN - WSYNC_HS_HELLO_LEN;
    /* The server reads exactly payload_len bytes: judge only what it would. */
    if (decoded && h.payload_len > plen)
        return 0;
    for (p = 1; p < WSYNC_HS_NPURPOSES; p++) {
        int same = decoded && h.purpose == p;
        with = wsync_hs_judge(&token, (wsync_hs_purpose_t)p, 0, ch, hello, payload, why, sizeof(why));
        without = wsync_hs_judge(&none, (wsync_hs_purpose_t)p, 0, ch, hello, payload, why, sizeof(why));
        if ((without == WSYNC_OK) != same)
            abort();
        if (with == WSYNC_OK) {
            if (!same || !(h.flags & WSYNC_HS_FLAG_TOKEN) ||
                wsync_hs_key(&token, (wsync_hs_purpose_t)p, key) != WSYNC_OK ||
                wsync_hs_client_proof(key, ch, hello, payload, h.payload_len, want) != WSYNC_OK ||
                memcmp(want, h.proof, sizeof(want)) != 0)
                abort();
        }
        /* A local peer of this uid passes whenever the hello is well formed. */
        if ((wsync_hs_judge(&token, (wsync_hs_purpose_t)p, 1, ch, hello, payload, why, sizeof(why)) == WSYNC_OK) !=
            same)
            abort();
    }
    return 0;
}
