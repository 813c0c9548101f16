/* fdpass.c: abstract Unix sockets and SCM_RIGHTS messages. */
#include "common/net/fdpass.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/interrupt.h"
#include "common/base/util.h"

/* A name too long for sun_path is refused rather than cut: two long names
 * sharing a prefix would otherwise meet on the same socket. */
static wsync_status_t abstract_addr(const char *name, struct sockaddr_un *sa, socklen_t *len)
{
    size_t n = strlen(name);
    if (n == 0 || n > sizeof(sa->sun_path) - 1)
        return wsync_error(WSYNC_ERR_INVALID, "local socket name '%s' must be 1 to %zu characters", name,
                           sizeof(sa->sun_path) - 1);
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path + 1, name, n); /* leading NUL: abstract namespace */
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    return WSYNC_OK;
}

wsync_status_t wsync_unix_listen(const char *name, int *fd_out)
{
    struct sockaddr_un sa;
    socklen_t len;
    int fd;
    WSYNC_CHECK(abstract_addr(name, &sa, &len));
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return wsync_error(WSYNC_ERR_IO, "socket: %s", strerror(errno));
    if (bind(fd, (struct sockaddr *)&sa, len) != 0 || listen(fd, 64) != 0) {
        int e = errno;
        close(fd);
        return wsync_error(e == EADDRINUSE ? WSYNC_ERR_CONFLICT : WSYNC_ERR_IO,
                           "cannot listen on local socket '%s': %s%s", name, strerror(e),
                           e == EADDRINUSE ? " (another process already serves it: is local rank 0 running twice?)"
                                           : "");
    }
    *fd_out = fd;
    return WSYNC_OK;
}

wsync_status_t wsync_unix_connect(const char *name, int timeout_ms, int *fd_out)
{
    return wsync_unix_connect_cancellable(name, timeout_ms, NULL, fd_out);
}

wsync_status_t wsync_unix_connect_cancellable(const char *name, int timeout_ms, const int *cancel, int *fd_out)
{
    struct sockaddr_un sa;
    socklen_t len;
    uint64_t deadline = wsync_now_ns() + (uint64_t)timeout_ms * 1000000ULL;
    WSYNC_CHECK(abstract_addr(name, &sa, &len));
    for (;;) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), e;
        if (fd < 0)
            return wsync_error(WSYNC_ERR_IO, "socket: %s", strerror(errno));
        if (connect(fd, (struct sockaddr *)&sa, len) == 0) {
            *fd_out = fd;
            return WSYNC_OK;
        }
        e = errno;
        close(fd);
        if (wsync_cancelled(cancel))
            return wsync_error(WSYNC_ERR_CANCELLED, "waiting for local socket '%s': interrupted", name);
        if (wsync_now_ns() >= deadline)
            return wsync_error(WSYNC_ERR_TIMEOUT, "nobody serves local socket '%s' (%s): is local rank 0 running?",
                               name, strerror(e));
        usleep(20000);
    }
}

wsync_status_t wsync_fd_send(int sock, const void *msg, size_t len, int fd)
{
    char ctrl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {.iov_base = (void *)msg, .iov_len = len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    ssize_t n;
    if (fd >= 0) {
        struct cmsghdr *c;
        memset(ctrl, 0, sizeof(ctrl));
        mh.msg_control = ctrl;
        mh.msg_controllen = sizeof(ctrl);
        c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    do
        n = sendmsg(sock, &mh, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)len)
        return wsync_error(WSYNC_ERR_PEER, "local socket send: %s", n < 0 ? strerror(errno) : "short write");
    return WSYNC_OK;
}

wsync_status_t wsync_fd_recv(int sock, void *msg, size_t len, int *fd)
{
    char ctrl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {.iov_base = msg, .iov_len = len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl, .msg_controllen = sizeof(ctrl)};
    struct cmsghdr *c;
    ssize_t n;
    *fd = -1;
    do
        n = recvmsg(sock, &mh, MSG_WAITALL | MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
            memcpy(fd, CMSG_DATA(c), sizeof(int));
    if (n != (ssize_t)len) {
        if (*fd >= 0) {
            close(*fd);
            *fd = -1;
        }
        return wsync_error(WSYNC_ERR_PEER, "local socket: %s", n < 0 ? strerror(errno) : "peer closed");
    }
    return WSYNC_OK;
}
