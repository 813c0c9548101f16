/* ready_latency_bench.c: the fixed cost of a version. One trainer rank and
 * one engine rank (two processes, one host id: colocated; with --device
 * cuda:N both on that GPU, over the local transport) and a small model; per
 * version, from the start of publish() on the trainer until
 * wsync_receiver_pull returns it verified on the engine (the engine is
 * already long-polling): digest, report, the endpoint's publish and the
 * long poll's wake-up (whose answer carries the version record), the pull
 * request, the copy and the verification. Both routes: "slot" (publish
 * copies into a publish slot while the engine pulls) and "single" (single
 * copy, WSYNC_PUBLISH_SINGLE_COPY: the engine copies out of the trainer's
 * memory, and the trainer's wait, wsync_publisher_wait_held, is timed too).
 * Staged and in-place engines. Medians and minima over the measured versions
 * (after warm-up); WSYNC_TRACE=1 prints every step of each version.
 * Usage: ready_latency_bench [--device host|cuda:N] [--sizes 1M,4M,16M,64M]
 *        [--versions N] [--modes staged,in-place] [--tensors T] [--chunk 64M]
 * (--chunk: the plan's chunk size; a small chunk gives a small model the
 * piece count of a large one, e.g. 227 pieces for the Qwen2.5-7B image). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/mem/mem.h"
#include "common/base/util.h"
#include "engine_side/wsync_receiver.h"
#include "trainer_side/wsync_publisher.h"

#define WARMUP 3
#define MAX_VERS 256
#define TIMEOUT_MS 60000

enum { ROUTE_SLOT, ROUTE_SINGLE, NROUTES };
static const char *route_names[NROUTES] = {"slot", "single"};

/* Shared by the three processes (MAP_SHARED before fork). */
typedef struct shared {
    char url[256];
    volatile int url_ready;
    volatile int held;   /* the engine's last version returned by pull */
    volatile int failed; /* a process failed */
    uint64_t t_pub0[MAX_VERS + 1], t_pub1[MAX_VERS + 1], t_held[MAX_VERS + 1], t_ready[MAX_VERS + 1];
} shared_t;

typedef struct run_cfg {
    const char *device;
    uint64_t size, chunk;
    int tensors, versions;
    wsync_mode_t mode;
} run_cfg_t;

/* T tensors of BF16 filling `size` bytes (each a multiple of 256). */
static char *manifest_json(uint64_t size, int tensors)
{
    uint64_t each = (size / (uint64_t)tensors) & ~(uint64_t)255, off = 0;
    size_t cap = 256 + (size_t)tensors * 128, n = 0;
    char *s = malloc(cap);
    int i;
    if (s == NULL)
        return NULL;
    n += (size_t)snprintf(s + n, cap - n, "{\"version\":1,\"align\":256,\"image_size\":%llu,\"tensors\":[",
                          (unsigned long long)(each * (uint64_t)tensors));
    for (i = 0; i < tensors; i++, off += each)
        n += (size_t)snprintf(s + n, cap - n,
                              "%s{\"name\":\"w%d\",\"dtype\":\"BF16\",\"shape\":[%llu],\"offset\":%llu,\"size\":%"
                              "llu}",
                              i ? "," : "", i, (unsigned long long)(each / 2), (unsigned long long)off,
                              (unsigned long long)each);
    snprintf(s + n, cap - n, "]}");
    return s;
}

static int wait_flag(volatile int *flag, int want, volatile int *failed)
{
    uint64_t end = wsync_now_ns() + (uint64_t)TIMEOUT_MS * 1000000ULL;
    while (*flag < want && !*failed && wsync_now_ns() < end)
        usleep(50);
    return *flag >= want ? 0 : -1;
}

/* The trainer: versions 1..N on the slot route, N+1..2N single-copy. */
static int trainer_main(const run_cfg_t *c, shared_t *sh)
{
    char *mj = manifest_json(c->size, c->tensors);
    wsync_publisher_config_t pc = {.rank = 0,
                                   .world = 1,
                                   .manifest_json = mj,
                                   .device = c->device,
                                   .serve = "127.0.0.1:0",
                                   .listen = "127.0.0.1:0",
                                   .advertise_host = "127.0.0.1",
                                   .host_id = "bench-host",
                                   .chunk_size = c->chunk};
    const wsync_mem_ops_t *mem = NULL;
    wsync_publisher_t *pub = NULL;
    void *image = NULL;
    int dev = 0, v, rc = 1;
    if (mj == NULL || wsync_mem_get(c->device, &mem, &dev) != WSYNC_OK || mem->init(dev) != WSYNC_OK ||
        mem->alloc(c->size, &image) != WSYNC_OK)
        goto out;
    pc.image = image;
    if (wsync_publisher_create(&pc, &pub) != WSYNC_OK)
        goto out;
    snprintf(sh->url, sizeof(sh->url), "%s", wsync_publisher_control_url(pub));
    __atomic_store_n(&sh->url_ready, 1, __ATOMIC_RELEASE);
    for (v = 1; v <= 2 * c->versions; v++) {
        wsync_publish_opts_t po = {.flags = v > c->versions ? WSYNC_PUBLISH_SINGLE_COPY : WSYNC_PUBLISH_SLOT};
        if (wait_flag(&sh->held, v - 1, &sh->failed) != 0)
            goto out;
        usleep(3000); /* the engine is in its long poll again */
        if (mem->fill(image, c->size, 0, (uint64_t)v) != WSYNC_OK)
            goto out;
        sh->t_pub0[v] = wsync_now_ns();
        if (wsync_publisher_publish_opts(pub, (uint64_t)v, &po) != WSYNC_OK)
            goto out;
        sh->t_pub1[v] = wsync_now_ns();
        if (po.flags == WSYNC_PUBLISH_SINGLE_COPY &&
            wsync_publisher_wait_held(pub, (uint64_t)v, TIMEOUT_MS) != WSYNC_OK)
            goto out;
        sh->t_held[v] = wsync_now_ns();
    }
    wait_flag(&sh->held, 2 * c->versions, &sh->failed);
    rc = 0;
out:
    if (rc)
        fprintf(stderr, "ready_latency_bench: trainer: %s\n", wsync_last_error());
    wsync_publisher_destroy(pub);
    if (image)
        mem->free(image);
    free(mj);
    return rc;
}

static int engine_main(const run_cfg_t *c, shared_t *sh)
{
    wsync_receiver_config_t rc = {.engine_id = "bench-e0",
                                  .local_rank = 0,
                                  .local_world = 1,
                                  .device = c->device,
                                  .mode = c->mode,
                                  .bind_host = "127.0.0.1",
                                  .host_id = "bench-host"};
    wsync_receiver_t *r = NULL;
    int v, ret = 1;
    if (wait_flag(&sh->url_ready, 1, &sh->failed) != 0)
        return 1;
    rc.control_url = sh->url;
    if (wsync_receiver_create(&rc, &r) != WSYNC_OK)
        goto out;
    for (v = 1; v <= 2 * c->versions; v++) {
        uint64_t got = 0;
        if (wsync_receiver_pull(r, 0, TIMEOUT_MS, &got) != WSYNC_OK)
            goto out;
        sh->t_ready[got] = wsync_now_ns();
        __atomic_store_n(&sh->held, (int)got, __ATOMIC_RELEASE);
        v = (int)got;
    }
    ret = 0;
out:
    if (ret)
        fprintf(stderr, "ready_latency_bench: engine: %s\n", wsync_last_error());
    wsync_receiver_destroy(r);
    return ret;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Median and minimum of t1[v] - t0[v], in ms, over the route's measured versions. */
static void stat(const shared_t *sh, const uint64_t *t0, const uint64_t *t1, int first, int last, double *med,
                 double *min)
{
    uint64_t d[MAX_VERS];
    int n = 0, v;
    for (v = first; v <= last; v++)
        d[n++] = t1[v] - t0[v];
    qsort(d, (size_t)n, sizeof(d[0]), cmp_u64);
    *med = n ? (double)d[n / 2] / 1e6 : 0;
    *min = n ? (double)d[0] / 1e6 : 0;
    (void)sh;
}

static int run(const run_cfg_t *c)
{
    shared_t *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t tp, ep;
    int st_t = 0, st_e = 0, r;
    char sz[32];
    if (sh == MAP_FAILED)
        return 1;
    memset(sh, 0, sizeof(*sh));
    fflush(stdout);
    if ((tp = fork()) == 0)
        _exit(trainer_main(c, sh));
    if ((ep = fork()) == 0)
        _exit(engine_main(c, sh));
    waitpid(ep, &st_e, 0);
    if (!WIFEXITED(st_e) || WEXITSTATUS(st_e) != 0)
        sh->failed = 1;
    waitpid(tp, &st_t, 0);
    if (sh->failed || !WIFEXITED(st_t) || WEXITSTATUS(st_t) != 0) {
        munmap(sh, sizeof(*sh));
        return 1;
    }
    for (r = 0; r < NROUTES; r++) {
        int first = r * c->versions + 1 + WARMUP, last = (r + 1) * c->versions;
        double rd, rm, pd, pm, hd, hm;
        stat(sh, sh->t_pub0, sh->t_ready, first, last, &rd, &rm);
        stat(sh, sh->t_pub0, sh->t_pub1, first, last, &pd, &pm);
        stat(sh, sh->t_pub1, sh->t_held, first, last, &hd, &hm);
        printf("%-6s %-8s %-6s %3d tensors  publish->ready %7.3f ms (min %7.3f)  publish() %7.3f ms",
               wsync_fmt_size(c->size, sz, sizeof(sz)), c->mode == WSYNC_MODE_STAGED ? "staged" : "in-place",
               route_names[r], c->tensors, rd, rm, pd);
        if (r == ROUTE_SINGLE)
            printf("  trainer's wait_held %7.3f ms (min %7.3f)", hd, hm);
        printf("\n");
    }
    munmap(sh, sizeof(*sh));
    return 0;
}

int main(int argc, char **argv)
{
    const char *sizes = "1M,4M,16M,64M", *modes = "staged,in-place";
    run_cfg_t c = {.device = "host", .tensors = 64, .versions = 12, .chunk = 64ULL << 20};
    char buf[256], *save = NULL, *tok, mbuf[64], *msave = NULL, *m;
    int i, rc = 0;
    for (i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--device") == 0)
            c.device = argv[i + 1];
        else if (strcmp(argv[i], "--sizes") == 0)
            sizes = argv[i + 1];
        else if (strcmp(argv[i], "--versions") == 0)
            c.versions = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--modes") == 0)
            modes = argv[i + 1];
        else if (strcmp(argv[i], "--tensors") == 0)
            c.tensors = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--chunk") == 0) {
            if (wsync_parse_size(argv[i + 1], "--chunk", &c.chunk) != WSYNC_OK || c.chunk == 0) {
                fprintf(stderr, "ready_latency_bench: %s\n", wsync_last_error());
                return 2;
            }
        } else
            break;
    }
    if (i < argc || c.versions <= WARMUP || 2 * c.versions > MAX_VERS || c.tensors < 1) {
        fprintf(stderr,
                "usage: ready_latency_bench [--device host|cuda:N] [--sizes 1M,4M,16M,64M] "
                "[--versions N (%d..%d)] [--modes staged,in-place] [--tensors T] [--chunk 64M]\n",
                WARMUP + 1, MAX_VERS / 2);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    printf("ready_latency_bench: 1 trainer rank -> 1 engine rank on one host (%s), %d versions per route "
           "(first %d warm-up); medians\n",
           c.device, c.versions, WARMUP);
    snprintf(buf, sizeof(buf), "%s", sizes);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (wsync_parse_size(tok, "--sizes", &c.size) != WSYNC_OK || c.size < (uint64_t)c.tensors * 256) {
            fprintf(stderr, "ready_latency_bench: bad size '%s' (at least 256 bytes per tensor)\n", tok);
            return 2;
        }
        snprintf(mbuf, sizeof(mbuf), "%s", modes);
        for (m = strtok_r(mbuf, ",", &msave); m; m = strtok_r(NULL, ",", &msave)) {
            c.mode = strcmp(m, "in-place") == 0 ? WSYNC_MODE_IN_PLACE : WSYNC_MODE_STAGED;
            if (run(&c) != 0) {
                fprintf(stderr, "ready_latency_bench: the %s %s run failed\n", tok, m);
                rc = 1;
            }
        }
    }
    return rc;
}
