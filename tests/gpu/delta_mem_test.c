/* delta_mem_test.c: delta_mem.h, the encode and apply that delta pulls use
 * where a version lives. On the GPU (the cuda memory backend, device
 * buffers grown by the calls and shared by threads taking turns) the wire
 * of base -> next, both in GPU memory, comes to host memory byte for byte
 * the host encoder's; a host wire applied to GPU memory holding the base
 * gives next; a hostile wire is refused with the GPU bytes untouched; the
 * host backend is the host codec. Sizes grow and shrink so the device
 * buffer is reallocated and reused. */
#include <stdlib.h>
#include <string.h>

#include "common/delta/delta.h"
#include "common/delta/delta_mem.h"
#include "tests/gpu/gpu_test.h"
#include "tests/test.h"

static int ngpu;

static void pair(unsigned char *base, unsigned char *next, size_t len, uint64_t seed, int permille)
{
    fill_random(base, len, seed);
    memcpy(next, base, len);
    for (size_t i = 0; i + 1 < len; i += 2)
        if ((size_t)((i * 2654435761u + seed) % 1000) < (size_t)permille)
            next[i] ^= 0x5a;
}

/* One piece of `len` bytes (bf16), `permille` of its elements changed,
 * through `mem` (host or cuda). */
static void one(const wsync_mem_ops_t *mem, wsync_delta_dev_t **dev, size_t len, int permille)
{
    size_t cap = wsync_delta_bound(len, 2), hl = 0, ml = 0;
    unsigned char *base = malloc(len), *next = malloc(len), *hw = malloc(cap), *mw = malloc(cap),
                  *back = malloc(len);
    void *db = NULL, *dn = NULL;
    pair(base, next, len, len, permille);
    CHECK_OK(wsync_delta_encode(base, next, len, 2, hw, cap, &hl, NULL));
    CHECK_OK(mem->alloc(len, &db));
    CHECK_OK(mem->alloc(len, &dn));
    CHECK_OK(mem->copy(db, base, len));
    CHECK_OK(mem->copy(dn, next, len));
    CHECK_OK(wsync_delta_mem_encode(mem, dev, db, dn, len, 2, mw, cap, &ml));
    CHECK(ml == hl && memcmp(mw, hw, hl) == 0);
    CHECK_OK(wsync_delta_mem_apply(mem, dev, db, len, hw, hl)); /* db held the base */
    CHECK_OK(mem->copy(back, db, len));
    CHECK(memcmp(back, next, len) == 0);
    /* A wire with a wrong magic: refused, db untouched. */
    CHECK_OK(mem->copy(db, base, len));
    hw[0] ^= 0xff;
    CHECK(wsync_delta_mem_apply(mem, dev, db, len, hw, hl) == WSYNC_ERR_FORMAT);
    CHECK_OK(mem->copy(back, db, len));
    CHECK(memcmp(back, base, len) == 0);
    mem->free(db);
    mem->free(dn);
    free(base), free(next), free(hw), free(mw), free(back);
}

static const size_t lens[] = {4096, 8u << 20, 2, 1u << 20, 3u << 20};

static void test_gpu_wire_is_the_hosts(void)
{
    wsync_delta_dev_t *dev = NULL;
    if (ngpu == 0)
        SKIP("no CUDA device");
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
        for (int p = 0; p <= 1000; p += 250)
            one(&wsync_mem_cuda, &dev, lens[i], p ? p : 20);
    wsync_delta_dev_free(&wsync_mem_cuda, dev);
}

static void test_host_is_the_host_codec(void)
{
    wsync_delta_dev_t *dev = NULL;
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
        for (int p = 0; p <= 1000; p += 250)
            one(&wsync_mem_host, &dev, lens[i], p ? p : 20);
    CHECK(dev == NULL); /* no device buffer on the host */
}

int main(void)
{
    ngpu = gpu_count();
    RUN(test_gpu_wire_is_the_hosts);
    RUN(test_host_is_the_host_codec);
    TEST_EXIT();
}
