/* tensor_count_bench.c: what a version costs as a function of the tensor
 * count, the bytes held equal: the same image (default 384,000,000 bytes) as
 * 1,000 and as 100,000 bf16 tensors, published by 2 trainer-rank processes
 * (even layout, host memory, tcp) to one engine node of 2 local-rank
 * processes (in place), control endpoint in this process, as `wsync demo
 * --trainers 2 --engines 1 --local-ranks 2` runs it. Per version:
 *   publish-to-ready: from the moment both trainer ranks are told to publish
 *     v (each has written its extents) until the last engine rank's pull(v)
 *     returns (digest, report, long-poll wake-up, record fetch, requests,
 *     transfer, fan-out, verification);
 *   rank 0's publish(): wsync_publisher_publish on trainer rank 0 (rank 0 is
 *     the one that sent the manifest with every version).
 * The first WARMUP versions (the first layout fetch, each publish slot's and
 * image's first touch) are not counted; medians of the rest. Target: 100k
 * tensors within 10% of 1k tensors. Each count runs as its own job (fresh
 * endpoint and processes), twice, 1k / 100k / 1k / 100k, so drift on a
 * shared machine shows.
 * Usage: tensor_count_bench [bytes, default 384000000] [versions, default 8]
 *        [tensors: one job of that count only, e.g. under perf]. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/digest/digest.h"
#include "common/model/manifest.h"
#include "common/base/util.h"
#include "engine_side/wsync_receiver.h"
#include "common/control/control_server.h"
#include "trainer_side/wsync_publisher.h"

#define WARMUP 2
#define MAX_VERSIONS 64
#define W 2
#define L 2
#define TIMEOUT_MS 120000

typedef struct shared {
    volatile int filled[MAX_VERSIONS + 1][W]; /* trainer rank wrote version v into its extents */
    volatile uint64_t go[MAX_VERSIONS + 1];   /* publish v now (ns, CLOCK_MONOTONIC) */
    volatile uint64_t pub_ns[MAX_VERSIONS + 1][W];
    volatile uint64_t ready_ns[MAX_VERSIONS + 1][L];
    volatile int failed;
} shared_t;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* `ntensors` 1-D bf16 tensors of bytes / ntensors each (a multiple of 256,
 * so the image is the same bytes whatever the count). */
static char *manifest_text(uint64_t bytes, int ntensors)
{
    wsync_manifest_t *m = NULL;
    json_t *j = NULL;
    char name[64], *text = NULL;
    int64_t elems = (int64_t)(bytes / (uint64_t)ntensors / 256 * 256 / 2);
    int i;
    if (wsync_manifest_create(&m) != WSYNC_OK)
        return NULL;
    for (i = 0; i < ntensors; i++) {
        snprintf(name, sizeof(name), "model.layers.%d.t%d.weight", i / 100, i % 100);
        if (wsync_manifest_add(m, name, WSYNC_DTYPE_BF16, 1, &elems) != WSYNC_OK)
            goto out;
    }
    if (wsync_manifest_to_json(m, &j) == WSYNC_OK)
        text = json_dumps(j, JSON_COMPACT);
out:
    json_decref(j);
    wsync_manifest_free(m);
    return text;
}

static int trainer_main(shared_t *sh, const char *url, const char *manifest, uint64_t image_size, int rank,
                        int versions)
{
    wsync_publisher_config_t pc = {.control_url = url,
                                   .rank = rank,
                                   .world = W,
                                   .manifest_json = manifest,
                                   .layout = WSYNC_LAYOUT_EVEN,
                                   .listen = "127.0.0.1:0",
                                   .advertise_host = "127.0.0.1"};
    wsync_owned_t owned[4];
    wsync_publisher_t *p = NULL;
    char *image = NULL;
    int n = 0, v, k;
    if (wsync_publisher_owned_extents(manifest, WSYNC_LAYOUT_EVEN, W, rank, owned, 4, &n) != WSYNC_OK || n > 4)
        goto fail;
    image = malloc(image_size);
    if (image == NULL)
        goto fail;
    pc.image = image;
    if (wsync_publisher_create(&pc, &p) != WSYNC_OK)
        goto fail;
    for (v = 1; v <= versions && !sh->failed; v++) {
        uint64_t t0;
        for (k = 0; k < n; k++)
            wsync_fill_pattern(image + owned[k].offset, owned[k].len, owned[k].offset, (uint64_t)v);
        sh->filled[v][rank] = 1;
        while (sh->go[v] == 0 && !sh->failed)
            usleep(50);
        t0 = wsync_now_ns();
        if (wsync_publisher_publish(p, (uint64_t)v) != WSYNC_OK)
            goto fail;
        sh->pub_ns[v][rank] = wsync_now_ns() - t0;
    }
    /* Keep serving until the engines hold the last version. */
    while (!sh->failed && (sh->ready_ns[versions][0] == 0 || sh->ready_ns[versions][1] == 0))
        usleep(1000);
    wsync_publisher_destroy(p);
    free(image);
    return 0;
fail:
    fprintf(stderr, "tensor_count_bench: trainer rank %d: %s\n", rank, wsync_last_error());
    sh->failed = 1;
    wsync_publisher_destroy(p);
    free(image);
    return 1;
}

static int engine_main(shared_t *sh, const char *url, int rank, int versions)
{
    wsync_receiver_config_t rc = {.control_url = url,
                                  .engine_id = "tc0",
                                  .local_rank = rank,
                                  .local_world = L,
                                  .mode = WSYNC_MODE_IN_PLACE,
                                  .transport = "tcp",
                                  .bind_host = "127.0.0.1"};
    wsync_receiver_t *r = NULL;
    int v;
    if (wsync_receiver_create(&rc, &r) != WSYNC_OK)
        goto fail;
    for (v = 1; v <= versions && !sh->failed; v++) {
        uint64_t got = 0;
        if (wsync_receiver_pull(r, 0, TIMEOUT_MS, &got) != WSYNC_OK || got != (uint64_t)v)
            goto fail;
        sh->ready_ns[v][rank] = wsync_now_ns();
    }
    wsync_receiver_destroy(r);
    return 0;
fail:
    fprintf(stderr, "tensor_count_bench: engine rank %d: %s\n", rank, wsync_last_error());
    sh->failed = 1;
    wsync_receiver_destroy(r);
    return 1;
}

/* One job: endpoint here, W trainer and L engine processes; medians out. */
static int run_job(uint64_t bytes, int ntensors, int versions, double *ready_s, double *pub0_s, uint64_t *image)
{
    char *manifest = manifest_text(bytes, ntensors);
    shared_t *sh = mmap(NULL, sizeof(shared_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    wsync_control_server_config_t sc = {.listen = "127.0.0.1:0"};
    wsync_control_server_t *srv = NULL;
    pid_t pids[W + L];
    double rd[MAX_VERSIONS], pb[MAX_VERSIONS];
    int i, v, np = 0, rc = 1, status;
    json_t *mj = NULL;

    if (manifest == NULL || sh == MAP_FAILED)
        goto out;
    mj = json_loads(manifest, 0, NULL);
    *image = (uint64_t)json_integer_value(json_object_get(mj, "image_size"));
    if (wsync_control_server_start(&sc, &srv) != WSYNC_OK) {
        fprintf(stderr, "tensor_count_bench: %s\n", wsync_last_error());
        goto out;
    }
    fflush(stdout);
    for (i = 0; i < L; i++)
        if ((pids[np++] = fork()) == 0)
            _exit(engine_main(sh, wsync_control_server_url(srv), i, versions));
    for (i = 0; i < W; i++)
        if ((pids[np++] = fork()) == 0)
            _exit(trainer_main(sh, wsync_control_server_url(srv), manifest, *image, i, versions));
    for (v = 1; v <= versions && !sh->failed; v++) {
        /* v goes once the node holds v-1 and both ranks wrote v */
        while (!sh->failed && (v > 1 && (sh->ready_ns[v - 1][0] == 0 || sh->ready_ns[v - 1][1] == 0)))
            usleep(200);
        while (!sh->failed && (sh->filled[v][0] == 0 || sh->filled[v][1] == 0))
            usleep(200);
        usleep(20000); /* the engines are back in their long polls */
        sh->go[v] = wsync_now_ns();
    }
    while (!sh->failed && (sh->ready_ns[versions][0] == 0 || sh->ready_ns[versions][1] == 0))
        usleep(1000);
    for (i = 0; i < np; i++) {
        waitpid(pids[i], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            sh->failed = 1;
    }
    if (sh->failed)
        goto out;
    for (v = WARMUP + 1; v <= versions; v++) {
        uint64_t last = sh->ready_ns[v][0] > sh->ready_ns[v][1] ? sh->ready_ns[v][0] : sh->ready_ns[v][1];
        rd[v - WARMUP - 1] = (double)(last - sh->go[v]) / 1e9;
        pb[v - WARMUP - 1] = (double)sh->pub_ns[v][0] / 1e9;
    }
    *ready_s = median(rd, versions - WARMUP);
    *pub0_s = median(pb, versions - WARMUP);
    rc = 0;
out:
    wsync_control_server_stop(srv);
    json_decref(mj);
    free(manifest);
    if (sh != MAP_FAILED)
        munmap(sh, sizeof(*sh));
    return rc;
}

int main(int argc, char **argv)
{
    int counts[] = {1000, 100000, 1000, 100000};
    uint64_t bytes = 384000000, image = 0;
    int versions = argc > 2 ? atoi(argv[2]) : 8, i, jobs = 4;
    double ready[4], pub0[4];
    if (argc > 1 && wsync_parse_size(argv[1], "bytes", &bytes) != WSYNC_OK) {
        fprintf(stderr, "tensor_count_bench: %s\n", wsync_last_error());
        return 2;
    }
    if (versions <= WARMUP || versions > MAX_VERSIONS || bytes < 100000 * 256ull) {
        fprintf(stderr, "usage: tensor_count_bench [bytes >= 25600000] [versions %d..%d]\n", WARMUP + 1,
                MAX_VERSIONS);
        return 2;
    }
    if (argc > 3) { /* one job of that many tensors (for profiling) */
        counts[0] = atoi(argv[3]);
        jobs = 1;
        if (counts[0] < 1 || (uint64_t)counts[0] * 256 > bytes) {
            fprintf(stderr, "tensor_count_bench: the tensor count must be 1..bytes/256\n");
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    printf("tensor_count_bench: %d trainer ranks -> 1 engine node x %d ranks, tcp on loopback, in place; "
           "median of versions %d..%d\n",
           W, L, WARMUP + 1, versions);
    printf("  %-8s %-12s %18s %16s\n", "tensors", "image bytes", "publish->ready s", "rank 0 publish s");
    for (i = 0; i < jobs; i++) {
        if (run_job(bytes, counts[i], versions, &ready[i], &pub0[i], &image) != 0) {
            printf("tensor_count_bench: FAILED (%d tensors)\n", counts[i]);
            return 1;
        }
        printf("  %-8d %-12llu %18.3f %16.3f\n", counts[i], (unsigned long long)image, ready[i], pub0[i]);
        fflush(stdout);
    }
    if (jobs == 4) {
        double r1 = (ready[0] + ready[2]) / 2, r100 = (ready[1] + ready[3]) / 2;
        double p1 = (pub0[0] + pub0[2]) / 2, p100 = (pub0[1] + pub0[3]) / 2;
        printf("  100k / 1k: publish->ready %.2f, rank 0 publish %.2f (target <= 1.10; means of the two jobs)\n",
               r100 / r1, p100 / p1);
    }
    return 0;
}
