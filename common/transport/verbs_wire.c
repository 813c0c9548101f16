/* verbs_wire.c: segmenting puts into work requests, the immediate, and the
 * verbs transport's blobs and handshake encoding (see verbs_wire.h). */
#include "common/transport/verbs_wire.h"

#include <arpa/inet.h>
#include <endian.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/le.h"

uint32_t verbs_imm_encode(uint64_t tag)
{
    return htonl((uint32_t)tag);
}

uint32_t verbs_imm_decode(uint32_t imm_data)
{
    return ntohl(imm_data);
}

size_t verbs_seg_count(uint64_t len, uint32_t max_msg)
{
    if (max_msg == 0)
        return 0;
    if (len == 0)
        return 1;
    return (size_t)((len + max_msg - 1) / max_msg);
}

size_t verbs_seg_build(uint64_t len, uint32_t max_msg, verbs_seg_t *segs, size_t cap)
{
    size_t n = verbs_seg_count(len, max_msg), i;
    uint64_t off = 0;
    if (n == 0 || n > cap)
        return 0;
    for (i = 0; i < n; i++) {
        uint64_t left = len - off;
        segs[i].src_off = off;
        segs[i].dst_off = off;
        segs[i].len = (uint32_t)(left < max_msg ? left : max_msg);
        segs[i].last = i + 1 == n;
        off += segs[i].len;
    }
    return n;
}

static void put_head(unsigned char *out)
{
    wsync_put32(out, VERBS_MAGIC);
    wsync_put16(out + 4, VERBS_VERSION);
    wsync_put16(out + 6, 0);
}

static wsync_status_t check_head(const unsigned char *in, size_t len, size_t want, const char *what)
{
    if (len != want)
        return wsync_error(WSYNC_ERR_FORMAT, "verbs: %s is %zu bytes, expected %zu: not a verbs %s", what, len,
                           want, what);
    if (wsync_get32(in) != VERBS_MAGIC || wsync_get16(in + 4) != VERBS_VERSION)
        return wsync_error(WSYNC_ERR_FORMAT,
                           "verbs: %s has magic %08x version %u, expected %08x version %d "
                           "(another transport, or another wsync version)",
                           what, wsync_get32(in), wsync_get16(in + 4), VERBS_MAGIC, VERBS_VERSION);
    return WSYNC_OK;
}

void verbs_addr_encode(const verbs_addr_t *a, unsigned char *out)
{
    memset(out, 0, VERBS_ADDR_LEN);
    put_head(out);
    wsync_put64(out + 8, a->nonce);
    memcpy(out + 16, a->hostport, strnlen(a->hostport, VERBS_HOSTPORT_MAX - 1));
}

wsync_status_t verbs_addr_decode(const unsigned char *in, size_t len, verbs_addr_t *a)
{
    WSYNC_CHECK(check_head(in, len, VERBS_ADDR_LEN, "receiver address"));
    a->nonce = wsync_get64(in + 8);
    memcpy(a->hostport, in + 16, VERBS_HOSTPORT_MAX);
    a->hostport[VERBS_HOSTPORT_MAX - 1] = '\0';
    if (a->hostport[0] == '\0' || strchr(a->hostport, ':') == NULL)
        return wsync_error(WSYNC_ERR_FORMAT, "verbs: receiver address carries no host:port");
    return WSYNC_OK;
}

void verbs_key_encode(const verbs_key_t *k, unsigned char *out)
{
    uint32_t i;
    memset(out, 0, VERBS_KEY_LEN);
    put_head(out);
    wsync_put16(out + 6, (uint16_t)k->ndev);
    wsync_put64(out + 8, k->nonce);
    wsync_put64(out + 16, k->addr);
    wsync_put64(out + 24, k->len);
    for (i = 0; i < k->ndev && i < VERBS_MAX_DEVS; i++)
        wsync_put32(out + 32 + 4 * i, k->rkey[i]);
}

wsync_status_t verbs_key_decode(const unsigned char *in, size_t len, verbs_key_t *k)
{
    uint32_t i;
    WSYNC_CHECK(check_head(in, len, VERBS_KEY_LEN, "region key"));
    memset(k, 0, sizeof(*k));
    k->ndev = wsync_get16(in + 6);
    k->nonce = wsync_get64(in + 8);
    k->addr = wsync_get64(in + 16);
    k->len = wsync_get64(in + 24);
    if (k->ndev == 0 || k->ndev > VERBS_MAX_DEVS)
        return wsync_error(WSYNC_ERR_FORMAT, "verbs: region key names %u devices (1..%d allowed)", k->ndev,
                           VERBS_MAX_DEVS);
    if (k->addr + k->len < k->addr)
        return wsync_error(WSYNC_ERR_FORMAT, "verbs: region key's address range wraps around");
    for (i = 0; i < k->ndev; i++)
        k->rkey[i] = wsync_get32(in + 32 + 4 * i);
    return WSYNC_OK;
}

size_t verbs_hello_len(uint32_t nqp)
{
    return VERBS_HELLO_HDR + (size_t)VERBS_ATTR_LEN * nqp;
}

size_t verbs_hello_encode(const verbs_hello_t *h, unsigned char *out)
{
    uint32_t i;
    size_t len = verbs_hello_len(h->nqp);
    memset(out, 0, len);
    put_head(out);
    wsync_put32(out + 8, (uint32_t)h->sender);
    wsync_put32(out + 12, h->nqp);
    wsync_put64(out + 16, h->nonce);
    for (i = 0; i < h->nqp; i++) {
        unsigned char *p = out + VERBS_HELLO_HDR + (size_t)VERBS_ATTR_LEN * i;
        const verbs_qp_attr_t *q = &h->qp[i];
        memcpy(p, q->gid, 16);
        wsync_put32(p + 16, q->qpn);
        wsync_put32(p + 20, q->psn);
        wsync_put16(p + 24, q->lid);
        p[26] = q->mtu;
        p[27] = q->port;
    }
    return len;
}

size_t verbs_hello_peek_len(const unsigned char *hdr)
{
    uint32_t n = wsync_get32(hdr + 12);
    if (wsync_get32(hdr) != VERBS_MAGIC || wsync_get16(hdr + 4) != VERBS_VERSION || n == 0 || n > VERBS_MAX_DEVS)
        return 0;
    return verbs_hello_len(n);
}

wsync_status_t verbs_hello_decode(const unsigned char *in, size_t len, verbs_hello_t *h)
{
    uint32_t i;
    if (len < VERBS_HELLO_HDR)
        return wsync_error(WSYNC_ERR_FORMAT, "verbs: handshake of %zu bytes is shorter than its header", len);
    memset(h, 0, sizeof(*h));
    h->nqp = wsync_get32(in + 12);
    if (h->nqp == 0 || h->nqp > VERBS_MAX_DEVS)
        return wsync_error(WSYNC_ERR_FORMAT, "verbs: handshake names %u queue pairs (1..%d allowed)", h->nqp,
                           VERBS_MAX_DEVS);
    WSYNC_CHECK(check_head(in, len, verbs_hello_len(h->nqp), "handshake"));
    h->sender = (int32_t)wsync_get32(in + 8);
    h->nonce = wsync_get64(in + 16);
    for (i = 0; i < h->nqp; i++) {
        const unsigned char *p = in + VERBS_HELLO_HDR + (size_t)VERBS_ATTR_LEN * i;
        verbs_qp_attr_t *q = &h->qp[i];
        memcpy(q->gid, p, 16);
        q->qpn = wsync_get32(p + 16);
        q->psn = wsync_get32(p + 20);
        q->lid = wsync_get16(p + 24);
        q->mtu = p[26];
        q->port = p[27];
        if (q->qpn == 0 || q->qpn > 0xffffff || q->psn > 0xffffff || q->mtu < 1 || q->mtu > 5 || q->port == 0)
            return wsync_error(WSYNC_ERR_FORMAT,
                               "verbs: handshake queue pair %u has out-of-range attributes (qpn %u, psn %u, "
                               "mtu %u, port %u)",
                               i, q->qpn, q->psn, q->mtu, q->port);
    }
    return WSYNC_OK;
}
