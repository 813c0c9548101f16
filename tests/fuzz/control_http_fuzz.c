/* control_http_fuzz.c: libFuzzer target for the control endpoint as a
 * client reaches it: the input is the raw bytes of an HTTP request (request
 * line, headers, body), handed to a running server over a socketpair
 * (MHD_add_connection). Every route, the header-time refusals, the URL and
 * query parsers and the body parsers are behind it. The server holds a
 * token, --private-status and a client limit, and a published version.
 * Whatever the bytes: the server never crashes (ASan, UBSan), answers with
 * an HTTP status line or closes, and a request without the token never gets
 * a 2xx from a POST route. Long polls are made to answer at once (the input's
 * "timeout_ms" loses its meaning), so a run leaves no connection waiting. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/log.h"
#include "common/control/server_internal.h"

#define TOKEN "fuzz-token"

static wsync_control_server_t *server;

static void post(const char *path, const char *body)
{
    char req[2048];
    int sv[2];
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    snprintf(req, sizeof(req),
             "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOKEN "\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n%s",
             path, strlen(body), body);
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 ||
        MHD_add_connection(server->d, sv[1], (struct sockaddr *)&a, sizeof(a)) != MHD_YES)
        abort();
    if (write(sv[0], req, strlen(req)) < 0)
        abort();
    while (read(sv[0], req, sizeof(req)) > 0)
        ;
    close(sv[0]);
}

static void start(void)
{
    char dir[] = "/tmp/wsync-fuzz-XXXXXX", tok[64];
    FILE *f;
    wsync_control_server_config_t cfg = {.listen = "127.0.0.1:0", .private_status = 1, .max_client_connections = 64};
    signal(SIGPIPE, SIG_IGN); /* the server may close before it read all of a request */
    if (mkdtemp(dir) == NULL)
        abort();
    snprintf(tok, sizeof(tok), "%s/token", dir);
    if ((f = fopen(tok, "w")) == NULL)
        abort();
    fputs(TOKEN "\n", f);
    fclose(f);
    chmod(tok, 0600);
    cfg.token_file = tok;
    wsync_log_set_level(WSYNC_LOG_ERROR);
    if (wsync_control_server_start(&cfg, &server) != WSYNC_OK)
        abort();
    unlink(tok);
    rmdir(dir);
    post("/v1/trainers/register",
         "{\"rank\":0,\"world\":1,\"host\":\"h\",\"endpoint\":{\"pull\":\"127.0.0.1:9\"}}");
    post("/v1/engines/register", "{\"id\":\"e1\",\"host\":\"h\",\"local_ranks\":1}");
    post("/v1/publish",
         "{\"rank\":0,\"world\":1,\"version\":1,\"layout\":{\"manifest_digest\":\"ab\",\"chunk_size\":4,"
         "\"layout\":\"even\",\"layout_digest\":\"cd\",\"image_size\":8,\"world\":1,\"manifest\":{}},"
         "\"pieces\":[{\"id\":0,\"offset\":0,\"len\":8,\"digest\":\"00\"}]}");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    char *req, reply[256];
    size_t got = 0;
    int sv[2], authed;
    struct pollfd pfd;
    ssize_t n;

    if (server == NULL)
        start();
    if (size > (1u << 20))
        return 0;
    req = malloc(size + 1);
    memcpy(req, data, size);
    req[size] = '\0';
    for (char *p = req; (p = memmem(p, size - (size_t)(p - req), "timeout_ms", 10)) != NULL; p += 10)
        p[9] = 'z'; /* no long poll waits */
    authed = memmem(req, size, "Bearer " TOKEN, strlen("Bearer " TOKEN)) != NULL;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        abort();
    if (MHD_add_connection(server->d, sv[1], (struct sockaddr *)&a, sizeof(a)) != MHD_YES) {
        close(sv[0]);
        free(req);
        return 0; /* refused (connection limit): nothing to check */
    }
    /* An input without the end of its headers gets one: MHD answers at once
     * instead of waiting for more. */
    if ((size > 0 && write(sv[0], req, size) < 0) ||
        (memmem(req, size, "\r\n\r\n", 4) == NULL && write(sv[0], "\r\n\r\n", 4) < 0)) {
        close(sv[0]);
        free(req);
        return 0;
    }
    /* The answer comes at once; a request still waiting for its body gets
     * the end of the stream after 1 ms (not with the bytes: MHD's
     * edge-triggered read would miss an end that came with the data). */
    pfd = (struct pollfd){.fd = sv[0], .events = POLLIN};
    if (poll(&pfd, 1, 1) == 0)
        shutdown(sv[0], SHUT_WR);
    while (got < 12 && poll(&pfd, 1, 200) == 1 && (n = read(sv[0], reply + got, sizeof(reply) - 1 - got)) > 0)
        got += (size_t)n;
    reply[got] = '\0';
    close(sv[0]);
    if (got > 0 && strncmp(reply, "HTTP/1.", 7) != 0)
        abort();
    /* A POST answered 2xx carried the token (the header may be anywhere in the input). */
    if (got > 12 && reply[9] == '2' && strncmp(req, "POST", 4) == 0 && !authed)
        abort();
    free(req);
    return 0;
}
