/* auth.h: the data plane's shared secret. The token (the control endpoint's
 * bearer token, from a config's `token` or env WSYNC_TOKEN) is never used as
 * a key itself: HKDF-SHA256 turns it into one key per purpose (pull port,
 * tcp, nccl, verbs, local transport, node board), so a proof made for one
 * protocol proves nothing in another. MACs are HMAC-SHA256 (OpenSSL
 * libcrypto); every comparison of secret-derived bytes is CRYPTO_memcmp. */
#ifndef WSYNC_COMMON_NET_AUTH_H
#define WSYNC_COMMON_NET_AUTH_H

#include <stddef.h>

#include "common/wsync.h"

#define WSYNC_AUTH_KEY_LEN 32
#define WSYNC_AUTH_MAC_LEN 32

/* on == 0: no token configured (anyone who reaches a port is let in). The
 * struct is plain data: copy it freely; it is read-only once initialised. */
typedef struct wsync_auth {
    int on;
    unsigned char prk[WSYNC_AUTH_KEY_LEN]; /* HKDF-Extract of the token */
} wsync_auth_t;

/* From `token`; NULL: the `token` setting (env WSYNC_TOKEN, --set token=,
 * a config file). An empty or absent token leaves auth off. Fails only if
 * libcrypto does. */
wsync_status_t wsync_auth_init(wsync_auth_t *a, const char *token);
/* The token in file `path` into out[len] (len - 3 bytes at most), for every
 * process: one trailing "\n" or "\r\n" is dropped; an unreadable or empty
 * file, one over the length, of more lines, or with a NUL, space or a byte
 * that is not printable ASCII is refused naming the file and the problem.
 * Warns (LOG_WARN) when the file is readable by group or others. */
wsync_status_t wsync_auth_read_token_file(const char *path, char *out, size_t len);
/* 1 if a token is configured (a may be NULL). */
int wsync_auth_on(const wsync_auth_t *a);
/* The key for `label` (HKDF-Expand, one block). Requires a->on. */
wsync_status_t wsync_auth_key(const wsync_auth_t *a, const char *label, unsigned char key[WSYNC_AUTH_KEY_LEN]);

/* HMAC-SHA256 under `key` of the concatenation of `n` parts. */
typedef struct wsync_auth_part {
    const void *ptr;
    size_t len;
} wsync_auth_part_t;
wsync_status_t wsync_auth_mac(const unsigned char key[WSYNC_AUTH_KEY_LEN], const wsync_auth_part_t *parts, int n,
                              unsigned char out[WSYNC_AUTH_MAC_LEN]);
/* 1 if the n bytes are equal; time depends on n only (CRYPTO_memcmp). */
int wsync_auth_equal(const void *a, const void *b, size_t n);
/* n unpredictable bytes (RAND_bytes). */
wsync_status_t wsync_auth_random(void *buf, size_t n);

#endif
