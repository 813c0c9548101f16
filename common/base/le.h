/* le.h: little-endian fields of the wire formats (the data-plane handshake,
 * the tcp and verbs transports' hellos and blobs), at any alignment. */
#ifndef WSYNC_COMMON_LE_H
#define WSYNC_COMMON_LE_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

static inline void wsync_put16(unsigned char *p, uint16_t v)
{
    v = htole16(v);
    memcpy(p, &v, 2);
}
static inline void wsync_put32(unsigned char *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, 4);
}
static inline void wsync_put64(unsigned char *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, 8);
}
static inline uint16_t wsync_get16(const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return le16toh(v);
}
static inline uint32_t wsync_get32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return le32toh(v);
}
static inline uint64_t wsync_get64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return le64toh(v);
}

#endif
