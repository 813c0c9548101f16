/* shm_test.c: a shm window crosses a fork through an abstract Unix socket
 * (fd passing): the child maps the parent's window and each side sees the
 * other's writes; nothing appears in /dev/shm; the fdpass helpers fail
 * clearly. A sparse window holds pages only where written: a mapping of it
 * (as a peer maps it) adds none, a release frees the whole pages inside the
 * range (they read zero in both mappings) and keeps every byte outside it;
 * a release on a window that is not sparse changes nothing. */
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/digest/digest.h"
#include "common/base/util.h"
#include "common/net/fdpass.h"
#include "common/window/window.h"
#include "tests/test.h"

#define WIN_LEN (3u << 20)

static int count_dev_shm(void)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    if (d)
        closedir(d);
    return n;
}

static void sock_name(char *buf, size_t len, const char *what)
{
    snprintf(buf, len, "wsync-test-%s-%d", what, (int)getpid());
}

/* Child: connect, receive blob + fd, map, check the parent's pattern, write
 * its own pattern in the second half, say done. Exit code says what broke. */
static int child_main(const char *name)
{
    wsync_blob_t blob;
    unsigned char *p = NULL, *want;
    int sock = -1, fd = -1;
    char ok = 'k';
    if (wsync_unix_connect(name, 5000, &sock) != WSYNC_OK)
        return 10;
    if (wsync_fd_recv(sock, &blob, sizeof(blob), &fd) != WSYNC_OK || fd < 0)
        return 11;
    if (wsync_window_shm.map(&blob, fd, WIN_LEN, (void **)&p) != WSYNC_OK)
        return 12;
    close(fd); /* the mapping outlives the descriptor */
    want = malloc(WIN_LEN / 2);
    wsync_fill_pattern(want, WIN_LEN / 2, 0, 1);
    if (memcmp(p, want, WIN_LEN / 2) != 0)
        return 13;
    wsync_fill_pattern(p + WIN_LEN / 2, WIN_LEN / 2, WIN_LEN / 2, 2);
    if (wsync_fd_send(sock, &ok, 1, -1) != WSYNC_OK)
        return 14;
    /* Wait for the parent's second write, then check it. */
    if (wsync_fd_recv(sock, &ok, 1, &fd) != WSYNC_OK || ok != 'w')
        return 15;
    if (p[12345] != 0x5A)
        return 16;
    wsync_window_shm.unmap(p, WIN_LEN);
    free(want);
    close(sock);
    return 0;
}

static void a_forked_child_maps_the_window_and_both_see_writes(void)
{
    wsync_window_t w = {.fd = -1};
    wsync_blob_t blob;
    unsigned char *want;
    char name[64], ack = 0;
    int lsock = -1, sock = -1, status = 0, fd = -1, before = count_dev_shm();
    pid_t pid;

    sock_name(name, sizeof(name), "win");
    CHECK_OK(wsync_window_shm.alloc(WIN_LEN, &w));
    CHECK(w.fd >= 0 && w.ptr != NULL && w.len == WIN_LEN);
    CHECK_EQ(count_dev_shm(), before);
    wsync_fill_pattern(w.ptr, WIN_LEN / 2, 0, 1);
    CHECK_OK(wsync_window_shm.export_blob(&w, &blob));
    fflush(NULL);
    pid = fork();
    if (pid == 0)
        _exit(child_main(name));
    /* The child retries its connect until we listen: listen late on purpose. */
    usleep(50000);
    CHECK_OK(wsync_unix_listen(name, &lsock));
    sock = accept(lsock, NULL, NULL);
    CHECK(sock >= 0);
    CHECK_OK(wsync_fd_send(sock, &blob, sizeof(blob), w.fd));
    CHECK_OK(wsync_fd_recv(sock, &ack, 1, &fd));
    CHECK_EQ(ack, 'k');
    CHECK_EQ(fd, -1);
    want = malloc(WIN_LEN / 2);
    wsync_fill_pattern(want, WIN_LEN / 2, WIN_LEN / 2, 2);
    CHECK(memcmp((unsigned char *)w.ptr + WIN_LEN / 2, want, WIN_LEN / 2) == 0);
    ((unsigned char *)w.ptr)[12345] = 0x5A;
    CHECK_OK(wsync_fd_send(sock, "w", 1, -1));
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
    CHECK_EQ(count_dev_shm(), before);
    free(want);
    close(sock);
    close(lsock);
    wsync_window_shm.free(&w);
    CHECK(w.ptr == NULL && w.fd == -1);
}

static void map_refuses_bad_blobs_and_missing_descriptors(void)
{
    wsync_window_t w = {.fd = -1};
    wsync_blob_t blob, bad;
    void *p = NULL;
    CHECK_OK(wsync_window_shm.alloc(4096, &w));
    CHECK_OK(wsync_window_shm.export_blob(&w, &blob));
    CHECK_FAILS(wsync_window_shm.map(&blob, -1, 4096, &p), WSYNC_ERR_FORMAT, "descriptor");
    bad = blob;
    bad.data[0] ^= 1;
    CHECK_FAILS(wsync_window_shm.map(&bad, w.fd, 4096, &p), WSYNC_ERR_FORMAT, "not a wsync window");
    CHECK_FAILS(wsync_window_shm.map(&blob, w.fd, 8192, &p), WSYNC_ERR_FORMAT, "smaller");
    CHECK_OK(wsync_window_shm.map(&blob, w.fd, 4096, &p));
    ((char *)w.ptr)[100] = 'x';
    CHECK(((char *)p)[100] == 'x');
    wsync_window_shm.unmap(p, 4096);
    wsync_window_shm.free(&w);
    wsync_window_shm.free(&w); /* twice is harmless */
}

static uint64_t allocated(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? (uint64_t)st.st_blocks * 512 : UINT64_MAX;
}

static void sparse_window_holds_only_what_was_written(void)
{
    const size_t len = 8u << 20, page = (size_t)sysconf(_SC_PAGESIZE);
    const uint64_t off = (1u << 20) + 100, n = (3u << 20) - 100; /* [1 MiB + 100, 4 MiB) */
    wsync_window_t w, dense;
    wsync_blob_t blob;
    unsigned char *peer = NULL;
    size_t i, bad = 0;
    CHECK_OK(wsync_shm_alloc_sparse(len, &w));
    CHECK(w.sparse);
    CHECK_EQ(allocated(w.fd), 0);
    CHECK_OK(wsync_window_shm.export_blob(&w, &blob));
    CHECK_OK(wsync_window_shm.map(&blob, w.fd, len, (void **)&peer));
    CHECK_EQ(allocated(w.fd), 0); /* mapped without populating */
    memset(w.ptr, 0x5a, 6u << 20);
    CHECK(allocated(w.fd) >= (6u << 20));
    wsync_window_release(&w, off, n);
    /* the whole pages inside: from the page after off to 4 MiB */
    CHECK_EQ(allocated(w.fd), (6u << 20) - ((4u << 20) - ((off + page - 1) / page * page)));
    for (i = 0; i < (6u << 20); i++) {
        int inside = i >= (off + page - 1) / page * page && i < (4u << 20);
        bad += peer[i] != (inside ? 0 : 0x5a);
    }
    CHECK_EQ(bad, 0);
    wsync_window_shm.unmap(peer, len);
    wsync_window_shm.free(&w);

    CHECK_OK(wsync_window_shm.alloc(1u << 20, &dense));
    CHECK(!dense.sparse);
    memset(dense.ptr, 0x33, 1u << 20);
    wsync_window_release(&dense, 0, 1u << 20);
    CHECK_EQ(((unsigned char *)dense.ptr)[4096 * 3], 0x33);
    CHECK(allocated(dense.fd) >= (1u << 20));
    wsync_window_shm.free(&dense);
}

static void window_for_picks_by_memory_kind(void)
{
    CHECK(wsync_window_for(WSYNC_MEM_HOST) == &wsync_window_shm);
    CHECK(wsync_window_for(WSYNC_MEM_CUDA) == &wsync_window_cuda_ipc);
}

static void local_sockets_fail_clearly(void)
{
    char name[64];
    int a = -1, b = -1, fd = -1;
    char c;
    sock_name(name, sizeof(name), "busy");
    CHECK_OK(wsync_unix_listen(name, &a));
    CHECK_FAILS(wsync_unix_listen(name, &b), WSYNC_ERR_CONFLICT, name);
    close(a);
    {
        char longname[200];
        memset(longname, 'n', sizeof(longname) - 1);
        longname[sizeof(longname) - 1] = '\0';
        CHECK_FAILS(wsync_unix_listen(longname, &b), WSYNC_ERR_INVALID, "characters");
        CHECK_FAILS(wsync_unix_connect("", 10, &b), WSYNC_ERR_INVALID, "characters");
    }
    sock_name(name, sizeof(name), "nobody");
    CHECK_FAILS(wsync_unix_connect(name, 100, &b), WSYNC_ERR_TIMEOUT, name);
    /* A peer that closes mid-message is an error, not a short success. */
    {
        int sv[2];
        CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
        CHECK_OK(wsync_fd_send(sv[0], "ab", 2, -1));
        close(sv[0]);
        CHECK_FAILS(wsync_fd_recv(sv[1], name, 8, &fd), WSYNC_ERR_PEER, "local socket");
        CHECK_EQ(fd, -1);
        CHECK_FAILS(wsync_fd_recv(sv[1], &c, 1, &fd), WSYNC_ERR_PEER, "closed");
        close(sv[1]);
    }
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    RUN(a_forked_child_maps_the_window_and_both_see_writes);
    RUN(map_refuses_bad_blobs_and_missing_descriptors);
    RUN(window_for_picks_by_memory_kind);
    RUN(sparse_window_holds_only_what_was_written);
    RUN(local_sockets_fail_clearly);
    TEST_EXIT();
}
