/* gzip_test.c: which Accept-Encoding values take gzip (RFC 9110's codings
 * and q values), and ctl_gzip's output read back by zlib's inflate. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/control/gzip.h"
#include "tests/test.h"

static void test_accepts(void)
{
    CHECK(ctl_accepts_gzip("gzip"));
    CHECK(ctl_accepts_gzip("GZip"));
    CHECK(ctl_accepts_gzip("deflate, gzip, br, zstd"));
    CHECK(ctl_accepts_gzip("gzip;q=0.5"));
    CHECK(ctl_accepts_gzip("gzip ; q=1"));
    CHECK(ctl_accepts_gzip("gzip;q=0.001"));
    CHECK(ctl_accepts_gzip("*"));
    CHECK(ctl_accepts_gzip("identity, *;q=0.1"));
    CHECK(!ctl_accepts_gzip(NULL));
    CHECK(!ctl_accepts_gzip(""));
    CHECK(!ctl_accepts_gzip("identity"));
    CHECK(!ctl_accepts_gzip("deflate, br"));
    CHECK(!ctl_accepts_gzip("gzip;q=0"));
    CHECK(!ctl_accepts_gzip("gzip;q=0.000, identity"));
    CHECK(!ctl_accepts_gzip("x-gzip"));
    CHECK(!ctl_accepts_gzip("gzipped"));
    CHECK(!ctl_accepts_gzip("gzip;q="));
}

static void test_round_trip(void)
{
    size_t len = 300000, zlen = 0, i;
    char *text = malloc(len), *z, *back = malloc(len + 1);
    z_stream s;
    for (i = 0; i < len; i++) /* JSON-like: repeated keys, varying digits */
        text[i] = (i % 40 < 30) ? "{\"id\":\"node-\",\"state\":\"ready\",\"v\":"[i % 30]
                                : (char)('0' + (i * 7919) % 10);
    z = ctl_gzip(text, len, &zlen);
    CHECK(z != NULL);
    CHECK(zlen < len / 4);
    memset(&s, 0, sizeof(s));
    CHECK_EQ(inflateInit2(&s, 15 + 16), Z_OK);
    s.next_in = (Bytef *)z;
    s.avail_in = (uInt)zlen;
    s.next_out = (Bytef *)back;
    s.avail_out = (uInt)(len + 1);
    CHECK_EQ(inflate(&s, Z_FINISH), Z_STREAM_END);
    CHECK_EQ(s.total_out, len);
    CHECK(memcmp(back, text, len) == 0);
    inflateEnd(&s);
    free(z);
    z = ctl_gzip("", 0, &zlen); /* an empty body is still one valid member */
    CHECK(z != NULL && zlen >= 18);
    free(z);
    free(text);
    free(back);
}

int main(void)
{
    RUN(test_accepts);
    RUN(test_round_trip);
    TEST_EXIT();
}
