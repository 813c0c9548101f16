/* tcp_wire.h: the byte layouts of the tcp transport (hello, put header,
 * region key, address blob), all little-endian and fixed-size whatever the
 * host, so a receiver can check every field before trusting any of it. */
#ifndef WSYNC_COMMON_TCP_WIRE_H
#define WSYNC_COMMON_TCP_WIRE_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

#include "common/base/le.h"

#define TCP_MAGIC 0x70637477u /* "wtcp" */
#define TCP_VERSION 1

/* Sent once on each new connection: who the sender is and which receiver
 * instance it means (the nonce from the address blob). */
#define TCP_HELLO_LEN 24
typedef struct tcp_hello {
    uint32_t magic;
    uint16_t version;
    int32_t sender;
    uint64_t nonce;
} tcp_hello_t;

/* Before each put's payload. */
#define TCP_HDR_LEN 40
typedef struct tcp_hdr {
    uint32_t magic;
    uint16_t version;
    int32_t sender;
    uint32_t region;
    uint64_t dst_off;
    uint64_t len;
    uint64_t tag;
} tcp_hdr_t;

/* Region key blob: a put names the region by id; the nonce ties it to one
 * receiver instance so a key from another receiver is refused. */
#define TCP_KEY_LEN 32
typedef struct tcp_key {
    uint32_t magic;
    uint16_t version;
    uint32_t region;
    uint64_t nonce;
    uint64_t len;
} tcp_key_t;

/* Address blob: magic, version, nonce, then "host:port" NUL-padded. */
#define TCP_HOSTPORT_MAX 96
#define TCP_ADDR_LEN (16 + TCP_HOSTPORT_MAX)
typedef struct tcp_addr {
    uint32_t magic;
    uint16_t version;
    uint64_t nonce;
    char hostport[TCP_HOSTPORT_MAX];
} tcp_addr_t;

static inline void tcp_hello_encode(const tcp_hello_t *h, unsigned char b[TCP_HELLO_LEN])
{
    memset(b, 0, TCP_HELLO_LEN);
    wsync_put32(b, h->magic);
    wsync_put16(b + 4, h->version);
    wsync_put32(b + 8, (uint32_t)h->sender);
    wsync_put64(b + 16, h->nonce);
}

static inline void tcp_hello_decode(const unsigned char b[TCP_HELLO_LEN], tcp_hello_t *h)
{
    h->magic = wsync_get32(b);
    h->version = wsync_get16(b + 4);
    h->sender = (int32_t)wsync_get32(b + 8);
    h->nonce = wsync_get64(b + 16);
}

static inline void tcp_hdr_encode(const tcp_hdr_t *h, unsigned char b[TCP_HDR_LEN])
{
    memset(b, 0, TCP_HDR_LEN);
    wsync_put32(b, h->magic);
    wsync_put16(b + 4, h->version);
    wsync_put32(b + 8, (uint32_t)h->sender);
    wsync_put32(b + 12, h->region);
    wsync_put64(b + 16, h->dst_off);
    wsync_put64(b + 24, h->len);
    wsync_put64(b + 32, h->tag);
}

static inline void tcp_hdr_decode(const unsigned char b[TCP_HDR_LEN], tcp_hdr_t *h)
{
    h->magic = wsync_get32(b);
    h->version = wsync_get16(b + 4);
    h->sender = (int32_t)wsync_get32(b + 8);
    h->region = wsync_get32(b + 12);
    h->dst_off = wsync_get64(b + 16);
    h->len = wsync_get64(b + 24);
    h->tag = wsync_get64(b + 32);
}

static inline void tcp_key_encode(const tcp_key_t *k, unsigned char b[TCP_KEY_LEN])
{
    memset(b, 0, TCP_KEY_LEN);
    wsync_put32(b, k->magic);
    wsync_put16(b + 4, k->version);
    wsync_put32(b + 8, k->region);
    wsync_put64(b + 16, k->nonce);
    wsync_put64(b + 24, k->len);
}

static inline void tcp_key_decode(const unsigned char b[TCP_KEY_LEN], tcp_key_t *k)
{
    k->magic = wsync_get32(b);
    k->version = wsync_get16(b + 4);
    k->region = wsync_get32(b + 8);
    k->nonce = wsync_get64(b + 16);
    k->len = wsync_get64(b + 24);
}

static inline void tcp_addr_encode(const tcp_addr_t *a, unsigned char b[TCP_ADDR_LEN])
{
    memset(b, 0, TCP_ADDR_LEN);
    wsync_put32(b, a->magic);
    wsync_put16(b + 4, a->version);
    wsync_put64(b + 8, a->nonce);
    memcpy(b + 16, a->hostport, TCP_HOSTPORT_MAX);
}

static inline void tcp_addr_decode(const unsigned char b[TCP_ADDR_LEN], tcp_addr_t *a)
{
    a->magic = wsync_get32(b);
    a->version = wsync_get16(b + 4);
    a->nonce = wsync_get64(b + 8);
    memcpy(a->hostport, b + 16, TCP_HOSTPORT_MAX);
    a->hostport[TCP_HOSTPORT_MAX - 1] = '\0';
}

#endif
