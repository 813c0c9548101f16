/* delta_decode_fuzz.c: libFuzzer target for the delta wire an engine applies
 * from a trainer rank or a relay. The first two bytes give the piece's
 * length, the rest is the wire. Whatever it is, apply either refuses it with
 * the destination untouched, or succeeds having changed at most the header's
 * count of elements (all of them for full); and the result re-encodes to a
 * wire that applies to the same bytes. ASan catches any access out of bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/delta/delta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wsync_delta_header_t h;
    size_t len, out_len, cap, changed = 0;
    unsigned char *base, *dst, *out, *again;
    if (size < 2)
        return 0;
    wsync_log_set_level(WSYNC_LOG_ERROR);
    len = (size_t)data[0] | (size_t)data[1] << 8;
    base = malloc(len + 1);
    dst = malloc(len + 1);
    for (size_t i = 0; i < len; i++)
        base[i] = (unsigned char)(i * 131 + 7);
    memcpy(dst, base, len);
    if (wsync_delta_apply(dst, len, data + 2, size - 2) != WSYNC_OK) {
        if (memcmp(dst, base, len) != 0)
            abort();
        goto done;
    }
    if (wsync_delta_parse_header(data + 2, size - 2, len, &h) != WSYNC_OK)
        abort();
    for (size_t i = 0; i < len / h.width; i++)
        changed += memcmp(dst + i * h.width, base + i * h.width, h.width) != 0;
    if (h.form != WSYNC_DELTA_FULL && changed > h.changed)
        abort();
    cap = wsync_delta_bound(len, h.width);
    out = malloc(cap);
    again = malloc(len + 1);
    memcpy(again, base, len);
    if (wsync_delta_encode(base, dst, len, h.width, out, cap, &out_len, NULL) != WSYNC_OK ||
        wsync_delta_apply(again, len, out, out_len) != WSYNC_OK || memcmp(again, dst, len) != 0)
        abort();
    free(out);
    free(again);
done:
    free(base);
    free(dst);
    return 0;
}
