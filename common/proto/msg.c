/* msg.c: framed JSON messages over TCP (sockets: common/net/sock.c). */
#include "common/proto/msg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/util.h"

/* wsync_recv_all for the message channel, with its errors said. */
static wsync_status_t read_full(int fd, void *buf, size_t len, uint64_t deadline)
{
    int rc = wsync_recv_all(fd, buf, len, deadline);
    if (rc == 0)
        return WSYNC_OK;
    if (rc == 1 || errno == ECONNRESET)
        return wsync_error(WSYNC_ERR_PEER, "peer closed the connection");
    if (errno == ETIMEDOUT)
        return wsync_error(WSYNC_ERR_TIMEOUT, "no answer from peer in time");
    return wsync_error(WSYNC_ERR_PEER, "recv: %s", strerror(errno));
}

wsync_status_t wsync_msg_send(int fd, const json_t *msg)
{
    char *text = json_dumps(msg, JSON_COMPACT);
    unsigned char *frame;
    size_t len;
    wsync_status_t st = WSYNC_OK;

    WSYNC_CHECK_ALLOC(text);
    len = strlen(text);
    /* One write for length and text: two would meet Nagle and the peer's
     * delayed ACK (40 ms per message on a kept connection). */
    frame = malloc(len + 4);
    if (frame == NULL) {
        free(text);
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    frame[0] = (unsigned char)len;
    frame[1] = (unsigned char)(len >> 8);
    frame[2] = (unsigned char)(len >> 16);
    frame[3] = (unsigned char)(len >> 24);
    memcpy(frame + 4, text, len);
    if (wsync_send_all(fd, frame, len + 4) != 0)
        st = wsync_error(WSYNC_ERR_PEER, "send: %s", strerror(errno));
    free(frame);
    free(text);
    return st;
}

wsync_status_t wsync_msg_recv(int fd, int timeout_ms, json_t **out)
{
    uint64_t deadline = timeout_ms < 0 ? 0 : wsync_now_ns() + (uint64_t)timeout_ms * 1000000ULL;
    unsigned char hdr[4];
    json_error_t jerr;
    uint32_t len;
    char *buf;
    json_t *j;

    WSYNC_CHECK(read_full(fd, hdr, 4, deadline));
    len = (uint32_t)hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 | (uint32_t)hdr[3] << 24;
    if (len == 0 || len > WSYNC_MSG_MAX)
        return wsync_error(WSYNC_ERR_FORMAT, "message of %u bytes refused (limit %u)", len, WSYNC_MSG_MAX);
    buf = malloc(len);
    WSYNC_CHECK_ALLOC(buf);
    if (read_full(fd, buf, len, deadline) != WSYNC_OK) {
        free(buf);
        return WSYNC_ERR_PEER;
    }
    j = json_loadb(buf, len, 0, &jerr);
    free(buf);
    if (j == NULL || !json_is_object(j)) {
        json_decref(j);
        return wsync_error(WSYNC_ERR_FORMAT, "message is not a JSON object: %s", jerr.text);
    }
    *out = j;
    return WSYNC_OK;
}

wsync_status_t wsync_msg_call(int fd, const wsync_auth_t *auth, wsync_hs_purpose_t purpose, const char *peer,
                              const json_t *req, int timeout_ms, json_t **reply)
{
    uint64_t deadline = wsync_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 1) * 1000000ULL;
    char *text = json_dumps(req, JSON_COMPACT);
    wsync_status_t st;
    int left;

    WSYNC_CHECK_ALLOC(text);
    st = wsync_hs_connect(fd, auth, purpose, peer, text, strlen(text), timeout_ms, NULL, 0, NULL);
    free(text);
    WSYNC_CHECK(st);
    left = (int)((deadline - wsync_now_ns()) / 1000000ULL);
    if (wsync_now_ns() >= deadline)
        left = 1;
    return wsync_msg_recv(fd, left > 0 ? left : 1, reply);
}

wsync_status_t wsync_msg_accept(int fd, const wsync_auth_t *auth, wsync_hs_purpose_t purpose, int timeout_ms,
                                json_t **req)
{
    unsigned char *body = NULL;
    size_t len = 0;
    char peer[96], why[200];
    json_error_t jerr;
    wsync_hs_t hs;
    json_t *j;

    wsync_peer_name(fd, peer, sizeof(peer));
    WSYNC_CHECK(wsync_hs_serve(&hs, fd, auth, purpose, peer, WSYNC_MSG_MAX, timeout_ms, &body, &len));
    j = json_loadb((const char *)body, len, 0, &jerr);
    free(body);
    if (j == NULL || !json_is_object(j)) {
        snprintf(why, sizeof(why), "a %s must be a JSON object: %s", wsync_hs_what(purpose),
                 j ? "got another JSON value" : jerr.text);
        json_decref(j);
        wsync_hs_refuse(&hs, WSYNC_ERR_FORMAT, why);
        return wsync_error(WSYNC_ERR_FORMAT, "%s from %s refused: %s", wsync_hs_what(purpose), peer, why);
    }
    if (wsync_hs_accept(&hs, NULL, 0) != WSYNC_OK) {
        json_decref(j);
        return WSYNC_ERR_PEER;
    }
    *req = j;
    return WSYNC_OK;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

json_t *wsync_hex_to_json(const void *data, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *d = data;
    char *buf = malloc(2 * len + 1);
    json_t *j;
    size_t i;
    if (buf == NULL)
        return NULL;
    for (i = 0; i < len; i++) {
        buf[2 * i] = hex[d[i] >> 4];
        buf[2 * i + 1] = hex[d[i] & 15];
    }
    buf[2 * len] = '\0';
    j = json_string(buf);
    free(buf);
    return j;
}

wsync_status_t wsync_hex_from_json(const json_t *j, const char *what, void *out, size_t max, size_t *len)
{
    const char *s = json_string_value(j);
    unsigned char *o = out;
    size_t n, i;
    if (s == NULL)
        return wsync_error(WSYNC_ERR_FORMAT, "%s: expected a hex string", what);
    n = strlen(s);
    if (n % 2 || n / 2 > max)
        return wsync_error(WSYNC_ERR_FORMAT, "%s: bad hex string of %zu characters (at most %zu bytes)", what, n,
                           max);
    for (i = 0; i < n / 2; i++) {
        int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return wsync_error(WSYNC_ERR_FORMAT, "%s: bad hex digit", what);
        o[i] = (unsigned char)(hi << 4 | lo);
    }
    *len = n / 2;
    return WSYNC_OK;
}

json_t *wsync_blob_to_json(const wsync_blob_t *b)
{
    return wsync_hex_to_json(b->data, b->len < WSYNC_BLOB_MAX ? b->len : WSYNC_BLOB_MAX);
}

wsync_status_t wsync_blob_from_json(const json_t *j, const char *what, wsync_blob_t *out)
{
    size_t n = 0;
    WSYNC_CHECK(wsync_hex_from_json(j, what, out->data, WSYNC_BLOB_MAX, &n));
    out->len = (uint32_t)n;
    return WSYNC_OK;
}
