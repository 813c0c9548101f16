/* verbs_wire.h: the device-free half of the verbs transport: how a put is
 * cut into work requests, what the 32-bit immediate carries, and the byte
 * layouts of the address blob, region key and connection handshake (all
 * little-endian, fixed-size, checked field by field before use). Unit-tested
 * without an RDMA device. */
#ifndef WSYNC_COMMON_VERBS_WIRE_H
#define WSYNC_COMMON_VERBS_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "common/wsync.h"

#define VERBS_MAGIC 0x73627677u /* "wvbs" */
#define VERBS_VERSION 1
#define VERBS_MAX_DEVS 8 /* NICs per host a connection stripes over */

/* Immediate encoding. A put's tag is 64 bits (the data path puts the request
 * id in the high half and the piece id in the low half); the immediate has
 * 32. Rule: imm = the tag's low 32 bits (the piece id), in network order on
 * the wire as verbs requires. The receiver restores the high half from the
 * expect() registered for (sender, piece) -- the data path expects every
 * piece before it asks for it -- and reports the low half alone otherwise. */
uint32_t verbs_imm_encode(uint64_t tag);      /* value for wr.imm_data (big-endian) */
uint32_t verbs_imm_decode(uint32_t imm_data); /* wc.imm_data -> piece id */

/* One work request of a put. A put longer than the device's largest message
 * is cut into consecutive segments of at most max_msg bytes, all on the same
 * queue pair; every segment but the last is a plain RDMA WRITE, only the last
 * is a WRITE WITH IMMEDIATE and only it is signalled. Reliable-connected
 * queue pairs execute writes in order, so the receiver's completion for the
 * immediate implies every earlier segment has been placed, and the sender's
 * completion of the last segment retires the whole put. */
typedef struct verbs_seg {
    uint64_t src_off; /* from the put's source start */
    uint64_t dst_off; /* from the put's destination start */
    uint32_t len;
    int last; /* carries the immediate; signalled */
} verbs_seg_t;

/* Number of segments a put of `len` bytes needs (>= 1; a 0-byte put is one
 * empty WRITE WITH IMM so the receiver still sees it land). */
size_t verbs_seg_count(uint64_t len, uint32_t max_msg);
/* Fills segs[0..count) for a put of `len` bytes; returns the count, or 0 if
 * `cap` is too small or max_msg is 0. */
size_t verbs_seg_build(uint64_t len, uint32_t max_msg, verbs_seg_t *segs, size_t cap);

/* Address blob: magic, version, the receiver instance's nonce, and the
 * host:port of its handshake socket. */
#define VERBS_HOSTPORT_MAX 96
#define VERBS_ADDR_LEN (16 + VERBS_HOSTPORT_MAX)
typedef struct verbs_addr {
    uint64_t nonce;
    char hostport[VERBS_HOSTPORT_MAX];
} verbs_addr_t;
void verbs_addr_encode(const verbs_addr_t *a, unsigned char *out);
/* WSYNC_ERR_FORMAT naming what was wrong. */
wsync_status_t verbs_addr_decode(const unsigned char *in, size_t len, verbs_addr_t *a);

/* Region key: where the region lives in the receiver's address space, its
 * length, and one rkey per receiver device (a put on device i of the
 * connection uses rkey[i]). */
#define VERBS_KEY_LEN (32 + 4 * VERBS_MAX_DEVS)
typedef struct verbs_key {
    uint64_t nonce;
    uint64_t addr;
    uint64_t len;
    uint32_t ndev;
    uint32_t rkey[VERBS_MAX_DEVS];
} verbs_key_t;
void verbs_key_encode(const verbs_key_t *k, unsigned char *out);
wsync_status_t verbs_key_decode(const unsigned char *in, size_t len, verbs_key_t *k);

/* Connection attributes of one queue pair, exchanged both ways. */
typedef struct verbs_qp_attr {
    uint8_t gid[16];
    uint32_t qpn; /* 24 bits */
    uint32_t psn; /* 24 bits */
    uint16_t lid; /* InfiniBand only; 0 on RoCE */
    uint8_t mtu;  /* enum ibv_mtu value, 1..5 */
    uint8_t port;
} verbs_qp_attr_t;

/* Handshake message, each way once: who sends it (sender id; -1 from the
 * receiver), which receiver instance it means, and one queue pair per device
 * the connection stripes over. */
#define VERBS_ATTR_LEN 28
#define VERBS_HELLO_HDR 24
#define VERBS_HELLO_MAX (VERBS_HELLO_HDR + VERBS_ATTR_LEN * VERBS_MAX_DEVS)
typedef struct verbs_hello {
    int32_t sender;
    uint64_t nonce;
    uint32_t nqp;
    verbs_qp_attr_t qp[VERBS_MAX_DEVS];
} verbs_hello_t;
size_t verbs_hello_len(uint32_t nqp);
/* Returns the encoded length. */
size_t verbs_hello_encode(const verbs_hello_t *h, unsigned char *out);
/* Checks magic, version, counts and attribute ranges; WSYNC_ERR_FORMAT with
 * the reason otherwise. Needs the first VERBS_HELLO_HDR bytes to know the
 * whole length: see verbs_hello_peek_len. */
wsync_status_t verbs_hello_decode(const unsigned char *in, size_t len, verbs_hello_t *h);
/* From the header alone: the full message length, or 0 if it is no hello. */
size_t verbs_hello_peek_len(const unsigned char *hdr);

#endif
