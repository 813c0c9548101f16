/* gzip.c: Accept-Encoding parsing and one-shot gzip (zlib) for cached
 * answers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "common/control/gzip.h"

/* The coding named at t (up to ',' or end) is gzip or "*" and not refused
 * with q=0 (q=0, q=0.0, q=0.000). */
static int coding_ok(const char *t, size_t n)
{
    const char *semi = memchr(t, ';', n), *q;
    size_t name = semi ? (size_t)(semi - t) : n;
    while (name > 0 && (t[name - 1] == ' ' || t[name - 1] == '\t'))
        name--;
    if (!((name == 4 && strncasecmp(t, "gzip", 4) == 0) || (name == 1 && t[0] == '*')))
        return 0;
    if (semi == NULL)
        return 1;
    for (q = semi + 1; q < t + n && (*q == ' ' || *q == '\t'); q++)
        ;
    if (q + 1 >= t + n || (q[0] != 'q' && q[0] != 'Q') || q[1] != '=')
        return 1; /* a parameter other than q: the coding is still accepted */
    for (q += 2; q < t + n && (*q == '0' || *q == '.'); q++)
        ;
    return q < t + n && *q >= '1' && *q <= '9'; /* a non-zero digit: q > 0 */
}

int ctl_accepts_gzip(const char *h)
{
    while (h != NULL && *h) {
        const char *end = strchr(h, ',');
        size_t n = end ? (size_t)(end - h) : strlen(h);
        while (n > 0 && (*h == ' ' || *h == '\t'))
            h++, n--;
        if (coding_ok(h, n))
            return 1;
        h = end ? end + 1 : NULL;
    }
    return 0;
}

char *ctl_gzip(const char *text, size_t len, size_t *out_len)
{
    z_stream z;
    char *out;
    size_t cap;
    if (len > UINT32_MAX) /* one deflate call takes at most 4 GiB; a status document is far below */
        return NULL;
    memset(&z, 0, sizeof(z));
    /* 15 + 16: a gzip header and trailer around the deflate stream */
    if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return NULL;
    cap = deflateBound(&z, (uLong)len);
    out = malloc(cap);
    if (out == NULL) {
        deflateEnd(&z);
        return NULL;
    }
    z.next_in = (Bytef *)(uintptr_t)text;
    z.avail_in = (uInt)len;
    z.next_out = (Bytef *)out;
    z.avail_out = (uInt)cap;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
        deflateEnd(&z);
        free(out);
        return NULL;
    }
    *out_len = z.total_out;
    deflateEnd(&z);
    return out;
}
