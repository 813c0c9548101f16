/* verbs_wire_test.c: the verbs transport's device-free parts: immediate
 * encoding, cutting puts into work requests, and the address, region key
 * and handshake encodings (round trips and refusal of bad input). */
#include <arpa/inet.h>

#include "common/transport/verbs_wire.h"
#include "tests/test.h"

static void imm_carries_the_low_32_bits_in_network_order(void)
{
    uint64_t tag = 0x12345678deadbeefULL;
    uint32_t imm = verbs_imm_encode(tag);
    CHECK_EQ(imm, htonl(0xdeadbeefu));
    CHECK_EQ(verbs_imm_decode(imm), 0xdeadbeefu);
    CHECK_EQ(verbs_imm_decode(verbs_imm_encode(7)), 7);
}

static void small_put_is_one_signalled_write_with_imm(void)
{
    verbs_seg_t s[4];
    CHECK_EQ(verbs_seg_build(1000, 1u << 30, s, 4), 1);
    CHECK_EQ(s[0].len, 1000);
    CHECK_EQ(s[0].src_off, 0);
    CHECK(s[0].last);
    CHECK_EQ(verbs_seg_build(0, 4096, s, 4), 1); /* empty put still lands */
    CHECK_EQ(s[0].len, 0);
    CHECK(s[0].last);
}

static void large_put_is_split_and_only_the_last_carries_the_imm(void)
{
    verbs_seg_t s[8];
    size_t n = verbs_seg_build(10000, 4096, s, 8), i;
    uint64_t sum = 0;
    CHECK_EQ(n, 3);
    CHECK_EQ(verbs_seg_count(10000, 4096), 3);
    for (i = 0; i < n; i++) {
        CHECK_EQ(s[i].src_off, sum);
        CHECK_EQ(s[i].dst_off, sum);
        CHECK_EQ(s[i].last, i == n - 1);
        sum += s[i].len;
    }
    CHECK_EQ(sum, 10000);
    CHECK_EQ(s[2].len, 10000 - 2 * 4096);
    CHECK_EQ(verbs_seg_build(8192, 4096, s, 8), 2);  /* exact multiple: no empty tail */
    CHECK_EQ(verbs_seg_build(10000, 4096, s, 2), 0); /* too small an array */
    CHECK_EQ(verbs_seg_build(10, 0, s, 8), 0);       /* no max message size */
}

static void address_round_trips_and_refuses_others(void)
{
    verbs_addr_t a = {.nonce = 0x1122334455667788ULL}, b;
    unsigned char buf[VERBS_ADDR_LEN];
    snprintf(a.hostport, sizeof(a.hostport), "10.0.2.15:4567");
    verbs_addr_encode(&a, buf);
    CHECK_OK(verbs_addr_decode(buf, sizeof(buf), &b));
    CHECK_EQ(b.nonce, a.nonce);
    CHECK_STR(b.hostport, "10.0.2.15:4567");
    CHECK_FAILS(verbs_addr_decode(buf, sizeof(buf) - 1, &b), WSYNC_ERR_FORMAT, "not a verbs receiver address");
    buf[0] ^= 1;
    CHECK_FAILS(verbs_addr_decode(buf, sizeof(buf), &b), WSYNC_ERR_FORMAT, "another transport");
}

static void key_round_trips_every_rkey(void)
{
    verbs_key_t k = {.nonce = 9,
                     .addr = 0x7f0000001000ULL,
                     .len = 1ULL << 33,
                     .ndev = 3,
                     .rkey = {0x11, 0x2222, 0x333333}},
                o;
    unsigned char buf[VERBS_KEY_LEN];
    verbs_key_encode(&k, buf);
    CHECK_OK(verbs_key_decode(buf, sizeof(buf), &o));
    CHECK_EQ(o.nonce, 9);
    CHECK_EQ(o.addr, k.addr);
    CHECK_EQ(o.len, k.len);
    CHECK_EQ(o.ndev, 3);
    CHECK_EQ(o.rkey[0], 0x11);
    CHECK_EQ(o.rkey[2], 0x333333);
    k.ndev = 0;
    verbs_key_encode(&k, buf);
    CHECK_FAILS(verbs_key_decode(buf, sizeof(buf), &o), WSYNC_ERR_FORMAT, "devices");
    k.ndev = 1;
    k.addr = ~0ULL - 10;
    verbs_key_encode(&k, buf);
    CHECK_FAILS(verbs_key_decode(buf, sizeof(buf), &o), WSYNC_ERR_FORMAT, "wraps");
}

static verbs_hello_t sample_hello(void)
{
    verbs_hello_t h = {.sender = 3, .nonce = 0xabcdef, .nqp = 2};
    int i;
    for (i = 0; i < 2; i++) {
        memset(h.qp[i].gid, 0, 16);
        h.qp[i].gid[10] = h.qp[i].gid[11] = 0xff;
        h.qp[i].gid[12] = 10;
        h.qp[i].gid[15] = (uint8_t)(15 + i);
        h.qp[i].qpn = 0x11 + (uint32_t)i;
        h.qp[i].psn = 0xabcde + (uint32_t)i;
        h.qp[i].lid = 0;
        h.qp[i].mtu = 3;
        h.qp[i].port = 1;
    }
    return h;
}

static void handshake_round_trips_both_queue_pairs(void)
{
    verbs_hello_t h = sample_hello(), o;
    unsigned char buf[VERBS_HELLO_MAX];
    size_t len = verbs_hello_encode(&h, buf);
    CHECK_EQ(len, verbs_hello_len(2));
    CHECK_EQ(verbs_hello_peek_len(buf), len);
    CHECK_OK(verbs_hello_decode(buf, len, &o));
    CHECK_EQ(o.sender, 3);
    CHECK_EQ(o.nonce, 0xabcdef);
    CHECK_EQ(o.nqp, 2);
    CHECK_EQ(o.qp[1].qpn, 0x12);
    CHECK_EQ(o.qp[1].psn, 0xabcdf);
    CHECK_EQ(o.qp[0].mtu, 3);
    CHECK(memcmp(o.qp[1].gid, h.qp[1].gid, 16) == 0);
}

static void handshake_refuses_garbage_and_bad_attributes(void)
{
    verbs_hello_t h = sample_hello(), o;
    unsigned char buf[VERBS_HELLO_MAX];
    size_t len;
    memset(buf, 0x41, sizeof(buf));
    CHECK_EQ(verbs_hello_peek_len(buf), 0);
    CHECK_FAILS(verbs_hello_decode(buf, VERBS_HELLO_HDR, &o), WSYNC_ERR_FORMAT, "queue pairs");
    h.qp[1].psn = 1u << 24; /* PSNs are 24 bits */
    len = verbs_hello_encode(&h, buf);
    CHECK_FAILS(verbs_hello_decode(buf, len, &o), WSYNC_ERR_FORMAT, "out-of-range");
    h = sample_hello();
    h.qp[0].mtu = 9;
    len = verbs_hello_encode(&h, buf);
    CHECK_FAILS(verbs_hello_decode(buf, len, &o), WSYNC_ERR_FORMAT, "mtu 9");
    h = sample_hello();
    len = verbs_hello_encode(&h, buf);
    CHECK_FAILS(verbs_hello_decode(buf, len - 1, &o), WSYNC_ERR_FORMAT, "handshake");
}

int main(void)
{
    RUN(imm_carries_the_low_32_bits_in_network_order);
    RUN(small_put_is_one_signalled_write_with_imm);
    RUN(large_put_is_split_and_only_the_last_carries_the_imm);
    RUN(address_round_trips_and_refuses_others);
    RUN(key_round_trips_every_rkey);
    RUN(handshake_round_trips_both_queue_pairs);
    RUN(handshake_refuses_garbage_and_bad_attributes);
    TEST_EXIT();
}
