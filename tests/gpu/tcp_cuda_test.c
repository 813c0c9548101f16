/* tcp_cuda_test.c: the tcp transport with GPU memory on either end: puts
 * into a CUDA region go through the double-buffered bounce path (sizes that
 * span several slices, unaligned offsets), puts out of a CUDA region through
 * the sender's staging buffer; every byte is copied back and compared. */
#include "common/base/checks.h"
#include "common/base/util.h"
#include "tests/gpu/gpu_test.h"
#include "tests/test.h"

#define T (&wsync_transport_tcp)
#define LEN ((24u << 20) + 11)

static int ngpu;

typedef struct pair {
    wsync_transport_t *rx, *tx;
    wsync_region_t *dst, *src;
    wsync_blob_t key, skey, addr;
    wsync_conn_t *c;
} pair_t;

static int pair_up(pair_t *p, void *src, wsync_mem_kind_t sk, void *dst, wsync_mem_kind_t dk)
{
    wsync_transport_config_t cfg = {.bind_host = "127.0.0.1", .conns_per_peer = 4, .device = 0, .timeout_ms = 5000};
    memset(p, 0, sizeof(*p));
    return T->open(&cfg, &p->rx) || T->reg(p->rx, dst, LEN, dk, &p->dst, &p->key) || T->listen(p->rx, &p->addr) ||
           T->open(&cfg, &p->tx) || T->reg(p->tx, src, LEN, sk, &p->src, &p->skey) ||
           T->connect(p->tx, &p->addr, 1, &p->c);
}

static void pair_down(pair_t *p)
{
    if (p->c)
        T->disconnect(p->c);
    T->close(p->tx);
    T->close(p->rx);
}

/* Puts covering [0, LEN) in pieces of the given sizes; waits for all to land. */
static void put_all(pair_t *p)
{
    static const size_t sizes[] = {1, 4095, (4u << 20) + 1, 9u << 20, 3, 777777};
    size_t off = 0, n = 0, landed = 0;
    uint64_t deadline = wsync_now_ns() + 30000000000ULL;
    for (int i = 0; off < LEN; i++) {
        size_t len = sizes[i % WSYNC_ARRAY_LEN(sizes)];
        if (len > LEN - off)
            len = LEN - off;
        CHECK_OK(T->put(p->c, p->src, off, &p->key, off, len, (uint64_t)i));
        off += len;
        n++;
    }
    while (landed < n && wsync_now_ns() < deadline) {
        wsync_completion_t c[32];
        int k = 0;
        CHECK_OK(T->poll(p->rx, c, 32, &k, 100));
        for (int i = 0; i < k; i++) {
            if (c[i].kind == WSYNC_COMPLETION_ERROR)
                fprintf(stderr, "  error: %s\n", c[i].message);
            CHECK_EQ(c[i].kind, WSYNC_COMPLETION_LANDED);
            landed++;
        }
    }
    CHECK_EQ(landed, n);
}

static void puts_land_in_gpu_memory_byte_exact(void)
{
    unsigned char *host = malloc(LEN), *back = malloc(LEN), *dev = NULL;
    pair_t p;
    if (ngpu == 0) {
        free(host);
        free(back);
        SKIP("no CUDA device");
    }
    fill_random(host, LEN, 11);
    CHECK_OK(wsync_mem_cuda.alloc(LEN, (void **)&dev));
    if (dev && pair_up(&p, host, WSYNC_MEM_HOST, dev, WSYNC_MEM_CUDA) == 0) {
        put_all(&p);
        CHECK_OK(wsync_mem_cuda.copy(back, dev, LEN));
        CHECK(memcmp(host, back, LEN) == 0);
    } else {
        CHECK(!"set-up");
    }
    pair_down(&p);
    wsync_mem_cuda.free(dev);
    free(host);
    free(back);
}

static void puts_from_gpu_memory_land_byte_exact(void)
{
    unsigned char *host = malloc(LEN), *dst = calloc(1, LEN), *dev = NULL;
    pair_t p;
    if (ngpu == 0) {
        free(host);
        free(dst);
        SKIP("no CUDA device");
    }
    fill_random(host, LEN, 12);
    CHECK_OK(wsync_mem_cuda.alloc(LEN, (void **)&dev));
    CHECK_OK(wsync_mem_cuda.copy(dev, host, LEN));
    if (dev && pair_up(&p, dev, WSYNC_MEM_CUDA, dst, WSYNC_MEM_HOST) == 0) {
        put_all(&p);
        CHECK(memcmp(host, dst, LEN) == 0);
    } else {
        CHECK(!"set-up");
    }
    pair_down(&p);
    wsync_mem_cuda.free(dev);
    free(host);
    free(dst);
}

int main(void)
{
    ngpu = gpu_count();
    RUN(puts_land_in_gpu_memory_byte_exact);
    RUN(puts_from_gpu_memory_land_byte_exact);
    TEST_EXIT();
}
