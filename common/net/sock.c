/* sock.c: TCP sockets for every layer above (the message channel, the
 * transports, the handshake): listen, connect, host:port, whole-buffer I/O. */
#include "common/net/sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/interrupt.h"
#include "common/base/settings.h"
#include "common/base/util.h"

wsync_status_t wsync_split_hostport(const char *hostport, char *host, size_t hostlen, int *port)
{
    const char *colon = hostport ? strrchr(hostport, ':') : NULL;
    char *end = NULL;
    long p;

    if (colon == NULL || (size_t)(colon - hostport) >= hostlen)
        return wsync_error(WSYNC_ERR_INVALID, "'%s' is not HOST:PORT", hostport ? hostport : "");
    p = strtol(colon + 1, &end, 10);
    if (*end != '\0' || p < 0 || p > 65535 || end == colon + 1)
        return wsync_error(WSYNC_ERR_INVALID, "'%s': port must be 0..65535", hostport);
    memcpy(host, hostport, (size_t)(colon - hostport));
    host[colon - hostport] = '\0';
    *port = (int)p;
    return WSYNC_OK;
}

wsync_status_t wsync_tcp_listen(const char *host, int port, int *fd_out, int *port_out)
{
    struct sockaddr_in sa;
    socklen_t slen = sizeof(sa);
    int fd, one = 1;

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (host == NULL || host[0] == '\0' || strcmp(host, "0.0.0.0") == 0) {
        sa.sin_addr.s_addr = htonl(INADDR_ANY);
    } else if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        struct addrinfo hints = {.ai_family = AF_INET}, *res = NULL;
        if (getaddrinfo(host, NULL, &hints, &res) != 0 || res == NULL)
            return wsync_error(WSYNC_ERR_INVALID, "cannot resolve listen address '%s'", host);
        sa.sin_addr = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
        freeaddrinfo(res);
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return wsync_error(WSYNC_ERR_IO, "socket: %s", strerror(errno));
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 256) != 0) {
        int e = errno;
        close(fd);
        return wsync_error(WSYNC_ERR_IO, "cannot listen on %s:%d: %s", host ? host : "0.0.0.0", port, strerror(e));
    }
    getsockname(fd, (struct sockaddr *)&sa, &slen);
    *fd_out = fd;
    if (port_out)
        *port_out = ntohs(sa.sin_port);
    return WSYNC_OK;
}

wsync_status_t wsync_tcp_connect(const char *hostport, int timeout_ms, int *fd_out)
{
    return wsync_tcp_dial(hostport, timeout_ms, 1, fd_out);
}

wsync_status_t wsync_tcp_dial(const char *hostport, int timeout_ms, int retry_refused, int *fd_out)
{
    char host[256], portstr[16];
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    struct pollfd pfd;
    int port, fd, rc, err = 0, one = 1;
    socklen_t elen = sizeof(err);
    uint64_t deadline = wsync_now_ns() + (uint64_t)wsync_connect_timeout_ms(timeout_ms) * 1000000ULL;

    WSYNC_CHECK(wsync_split_hostport(hostport, host, sizeof(host), &port));
    snprintf(portstr, sizeof(portstr), "%d", port);
    if (getaddrinfo(host, portstr, &hints, &res) != 0 || res == NULL)
        return wsync_error(WSYNC_ERR_PEER, "cannot resolve '%s'", hostport);
    for (;;) {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            freeaddrinfo(res);
            return wsync_error(WSYNC_ERR_IO, "socket: %s", strerror(errno));
        }
        rc = connect(fd, res->ai_addr, res->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
            int left = (int)((deadline - wsync_now_ns()) / 1000000ULL);
            pfd.fd = fd;
            pfd.events = POLLOUT;
            rc = poll(&pfd, 1, left > 0 ? left : 0);
            if (rc == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err == 0)
                rc = 0;
            else
                rc = -1, errno = err ? err : ETIMEDOUT;
        }
        if (rc == 0)
            break;
        err = errno;
        close(fd);
        /* A peer that is still starting refuses; retry until the deadline
         * (unless the caller knows it listened: then it is gone). */
        if (err != ECONNREFUSED || !retry_refused || wsync_now_ns() + 50000000ULL >= deadline) {
            freeaddrinfo(res);
            return wsync_error(WSYNC_ERR_PEER, "cannot connect to %s: %s", hostport, strerror(err));
        }
        if (wsync_sleep_cancellable(50, NULL)) { /* SIGINT/SIGTERM: wsync_interrupt() */
            freeaddrinfo(res);
            return wsync_error(WSYNC_ERR_CANCELLED, "connecting to %s: interrupted", hostport);
        }
    }
    freeaddrinfo(res);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    *fd_out = fd;
    return WSYNC_OK;
}

void wsync_primary_ipv4(char *out, size_t len)
{
    struct ifaddrs *ifs = NULL, *i;
    snprintf(out, len, "127.0.0.1");
    if (getifaddrs(&ifs) != 0)
        return;
    for (i = ifs; i; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK) ||
            !(i->ifa_flags & IFF_UP))
            continue;
        inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out, (socklen_t)len);
        break;
    }
    freeifaddrs(ifs);
}

void wsync_listen_hostport(int fd, const char *bind_host, char *out, size_t len)
{
    struct sockaddr_in sa;
    socklen_t slen = sizeof(sa);
    char adv[64];
    memset(&sa, 0, sizeof(sa));
    getsockname(fd, (struct sockaddr *)&sa, &slen);
    if (bind_host && bind_host[0] && strcmp(bind_host, "0.0.0.0") != 0)
        snprintf(adv, sizeof(adv), "%s", bind_host);
    else
        wsync_primary_ipv4(adv, sizeof(adv));
    snprintf(out, len, "%s:%d", adv, ntohs(sa.sin_port));
}

void wsync_peer_name(int fd, char *out, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t slen = sizeof(ss);
    char host[64];
    memset(&ss, 0, sizeof(ss));
    if (getpeername(fd, (struct sockaddr *)&ss, &slen) != 0)
        snprintf(out, len, "unknown peer");
    else if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *sa = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &sa->sin_addr, host, sizeof(host));
        snprintf(out, len, "%s:%d", host, ntohs(sa->sin_port));
    } else if (ss.ss_family == AF_UNIX)
        snprintf(out, len, "local peer");
    else
        snprintf(out, len, "unknown peer");
}

/* Wait until fd is readable or the deadline (0: none) passes: 0, or -1
 * with errno set. */
static int wait_readable(int fd, uint64_t deadline)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    for (;;) {
        int left = -1, rc;
        if (deadline) {
            uint64_t now = wsync_now_ns();
            if (now >= deadline) {
                errno = ETIMEDOUT;
                return -1;
            }
            left = (int)((deadline - now) / 1000000ULL) + 1;
        }
        rc = poll(&pfd, 1, left);
        if (rc > 0)
            return 0;
        if (rc < 0 && errno != EINTR)
            return -1;
    }
}

int wsync_recv_all(int fd, void *buf, size_t len, uint64_t deadline_ns)
{
    char *p = buf;
    size_t want = len;
    while (len > 0) {
        ssize_t n;
        if (deadline_ns && wait_readable(fd, deadline_ns) != 0)
            return -1;
        /* Without a deadline one blocking call gathers it all. */
        n = recv(fd, p, len, deadline_ns ? 0 : MSG_WAITALL);
        if (n == 0) {
            errno = ECONNRESET;
            return len == want ? 1 : -1;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if ((errno == EAGAIN || errno == EWOULDBLOCK) && wait_readable(fd, deadline_ns) == 0)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int wsync_send_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}
