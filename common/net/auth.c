/* auth.c: token -> per-purpose keys (HKDF-SHA256), HMAC-SHA256, constant-time
 * comparison and randomness, each a thin wrapper over OpenSSL libcrypto. */
#include "common/net/auth.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/base/checks.h"
#include "common/base/settings.h"

/* HKDF's salt: fixed, so every process derives the same keys from a token. */
static const char salt[] = "wsync data plane v1";

static EVP_MAC *hmac_alg;
static pthread_once_t hmac_once = PTHREAD_ONCE_INIT;

static void fetch_hmac(void)
{
    hmac_alg = EVP_MAC_fetch(NULL, "HMAC", NULL);
}

static wsync_status_t hmac_raw(const void *key, size_t keylen, const wsync_auth_part_t *parts, int n,
                               unsigned char out[WSYNC_AUTH_MAC_LEN])
{
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
                           OSSL_PARAM_construct_end()};
    EVP_MAC_CTX *ctx;
    size_t outlen = 0;
    int ok, i;

    pthread_once(&hmac_once, fetch_hmac);
    if (hmac_alg == NULL)
        return wsync_error(WSYNC_ERR_INTERNAL, "libcrypto has no HMAC (OpenSSL providers missing?)");
    ctx = EVP_MAC_CTX_new(hmac_alg);
    if (ctx == NULL)
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory for an HMAC context");
    ok = EVP_MAC_init(ctx, key, keylen, params);
    for (i = 0; ok && i < n; i++)
        if (parts[i].len)
            ok = EVP_MAC_update(ctx, parts[i].ptr, parts[i].len);
    if (ok)
        ok = EVP_MAC_final(ctx, out, &outlen, WSYNC_AUTH_MAC_LEN);
    EVP_MAC_CTX_free(ctx);
    if (!ok || outlen != WSYNC_AUTH_MAC_LEN)
        return wsync_error(WSYNC_ERR_INTERNAL, "HMAC-SHA256 failed in libcrypto");
    return WSYNC_OK;
}

wsync_status_t wsync_auth_init(wsync_auth_t *a, const char *token)
{
    wsync_auth_part_t ikm;
    memset(a, 0, sizeof(*a));
    if (token == NULL)
        token = wsync_setting_str(WSYNC_SET_TOKEN);
    if (token == NULL || token[0] == '\0')
        return WSYNC_OK;
    /* HKDF-Extract: PRK = HMAC(salt, token). */
    ikm = (wsync_auth_part_t){token, strlen(token)};
    WSYNC_CHECK(hmac_raw(salt, sizeof(salt) - 1, &ikm, 1, a->prk));
    a->on = 1;
    return WSYNC_OK;
}

/* The one token-file rule, for every process (serve, trainer, engine): the
 * token goes into an HTTP header, so it is one line of printable ASCII
 * without spaces; only a trailing "\n" or "\r\n" is dropped. */
wsync_status_t wsync_auth_read_token_file(const char *path, char *out, size_t len)
{
    FILE *f = fopen(path, "r");
    struct stat sb;
    size_t n, i;
    int more;
    if (f == NULL)
        return wsync_error(WSYNC_ERR_IO, "token file %s: %s", path, strerror(errno));
    if (fstat(fileno(f), &sb) == 0 && (sb.st_mode & 0044))
        LOG_WARN("token file %s is readable by %s (mode %03o): anyone who reads it can publish and pull; "
                 "chmod 600 %s",
                 path, (sb.st_mode & 0004) ? "every user" : "its group", (unsigned)(sb.st_mode & 0777), path);
    n = fread(out, 1, len - 1, f);
    more = fgetc(f) != EOF;
    fclose(f);
    out[n] = '\0';
    if (n > 0 && out[n - 1] == '\n')
        out[--n] = '\0';
    if (n > 0 && out[n - 1] == '\r')
        out[--n] = '\0';
    if (more)
        return wsync_error(WSYNC_ERR_INVALID, "token file %s is longer than %zu bytes: a token is at most %zu",
                           path, len - 1, len - 3);
    if (n == 0)
        return wsync_error(WSYNC_ERR_INVALID, "token file %s is empty: write the token into it (one line)", path);
    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)out[i];
        if (ch > ' ' && ch < 0x7f)
            continue;
        memset(out, 0, len);
        return wsync_error(WSYNC_ERR_INVALID,
                           "token file %s: byte %zu is %s; a token is one line of printable ASCII without "
                           "spaces (only a trailing newline is dropped)",
                           path, i,
                           ch == '\n' || ch == '\r'  ? "a line break (more than one line)"
                           : ch == '\0'              ? "a NUL"
                           : ch == ' ' || ch == '\t' ? "white space"
                                                     : "not printable ASCII");
    }
    return WSYNC_OK;
}

int wsync_auth_on(const wsync_auth_t *a)
{
    return a != NULL && a->on;
}

wsync_status_t wsync_auth_key(const wsync_auth_t *a, const char *label, unsigned char key[WSYNC_AUTH_KEY_LEN])
{
    static const unsigned char one = 1;
    /* HKDF-Expand, first block: T(1) = HMAC(PRK, info || 0x01). */
    wsync_auth_part_t info[2] = {{label, strlen(label)}, {&one, 1}};
    if (!wsync_auth_on(a))
        return wsync_error(WSYNC_ERR_INTERNAL, "no token configured to derive the '%s' key from", label);
    return hmac_raw(a->prk, sizeof(a->prk), info, 2, key);
}

wsync_status_t wsync_auth_mac(const unsigned char key[WSYNC_AUTH_KEY_LEN], const wsync_auth_part_t *parts, int n,
                              unsigned char out[WSYNC_AUTH_MAC_LEN])
{
    return hmac_raw(key, WSYNC_AUTH_KEY_LEN, parts, n, out);
}

int wsync_auth_equal(const void *a, const void *b, size_t n)
{
    return CRYPTO_memcmp(a, b, n) == 0;
}

wsync_status_t wsync_auth_random(void *buf, size_t n)
{
    if (RAND_bytes(buf, (int)n) != 1)
        return wsync_error(WSYNC_ERR_INTERNAL, "libcrypto could not produce %zu random bytes", n);
    return WSYNC_OK;
}
