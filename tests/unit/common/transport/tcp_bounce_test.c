/* tcp_bounce_test.c: the double-buffered receive path that GPU regions use,
 * driven here with a counting stand-in for the device copy: every byte lands
 * in order across slices and puts, a copy failure or a broken socket fails
 * the put, and the helper is reusable after a failure. */
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/digest/digest.h"
#include "common/mem/mem.h"
#include "common/base/status.h"
#include "common/transport/tcp_bounce.h"
#include "common/base/util.h"
#include "tests/test.h"

static int copies, fail_copy_at = -1;

/* Host memcpy that counts calls and can fail on the Nth. */
static wsync_status_t counting_copy(void *dst, const void *src, size_t len)
{
    int n = __atomic_fetch_add(&copies, 1, __ATOMIC_RELAXED);
    if (n == fail_copy_at)
        return wsync_error(WSYNC_ERR_CUDA, "injected copy failure");
    memcpy(dst, src, len);
    return WSYNC_OK;
}

static wsync_mem_ops_t fake_gpu;

typedef struct feed {
    int fd;
    const unsigned char *p;
    size_t len;
} feed_t;

static void *feeder(void *arg)
{
    feed_t *f = arg;
    size_t off = 0;
    /* Odd-sized writes so slices never line up with what the socket gives. */
    while (off < f->len) {
        size_t n = f->len - off < 7777 ? f->len - off : 7777;
        ssize_t w = send(f->fd, f->p + off, n, MSG_NOSIGNAL);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    return NULL;
}

static void every_byte_lands_in_order_across_slices_and_puts(void)
{
    size_t lens[] = {1, 4096, 4097, 100000, 65536 * 3 + 5};
    size_t total = 0, off = 0;
    unsigned char *src, *dst;
    tcp_bounce_t *b = NULL;
    feed_t f;
    pthread_t th;
    int sv[2];
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
        total += lens[i];
    src = malloc(total);
    dst = calloc(1, total);
    wsync_fill_pattern(src, total, 0, 5);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    f = (feed_t){sv[0], src, total};
    pthread_create(&th, NULL, feeder, &f);
    copies = 0;
    fail_copy_at = -1;
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        CHECK_EQ(tcp_bounce_recv(&b, 4096, sv[1], &fake_gpu, (char *)dst + off, lens[i]), 0);
        /* Returned means copied: the bytes are already in place. */
        CHECK(memcmp(dst + off, src + off, lens[i]) == 0);
        off += lens[i];
    }
    pthread_join(th, NULL);
    CHECK(memcmp(dst, src, total) == 0);
    CHECK(copies >= (int)(total / 4096));
    tcp_bounce_free(b);
    close(sv[0]);
    close(sv[1]);
    free(src);
    free(dst);
}

static void a_failed_copy_or_a_broken_socket_fails_the_put(void)
{
    size_t len = 10 * 4096;
    unsigned char *src = malloc(len), *dst = calloc(1, len);
    tcp_bounce_t *b = NULL;
    feed_t f;
    pthread_t th;
    int sv[2];
    wsync_fill_pattern(src, len, 0, 6);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    f = (feed_t){sv[0], src, len};
    pthread_create(&th, NULL, feeder, &f);
    copies = 0;
    fail_copy_at = 3;
    CHECK_EQ(tcp_bounce_recv(&b, 4096, sv[1], &fake_gpu, (char *)dst, len), -1);
    /* The stream is now out of step; a caller closes it. The helper itself
     * is still usable for a new stream. */
    pthread_join(th, NULL);
    close(sv[0]);
    close(sv[1]);
    fail_copy_at = -1;
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    f = (feed_t){sv[0], src, len / 2};
    pthread_create(&th, NULL, feeder, &f);
    CHECK_EQ(tcp_bounce_recv(&b, 4096, sv[1], &fake_gpu, (char *)dst, len / 2), 0);
    CHECK(memcmp(dst, src, len / 2) == 0);
    pthread_join(th, NULL);
    /* The peer goes away after half a put. */
    (void)!send(sv[0], src, 5000, MSG_NOSIGNAL);
    close(sv[0]);
    CHECK_EQ(tcp_bounce_recv(&b, 4096, sv[1], &fake_gpu, (char *)dst, len), -1);
    close(sv[1]);
    tcp_bounce_free(b);
    tcp_bounce_free(NULL);
    free(src);
    free(dst);
}

int main(void)
{
    fake_gpu = wsync_mem_host;
    fake_gpu.name = "fake-gpu";
    fake_gpu.copy = counting_copy;
    RUN(every_byte_lands_in_order_across_slices_and_puts);
    RUN(a_failed_copy_or_a_broken_socket_fails_the_put);
    TEST_EXIT();
}
