/* e2e_cpu_bench.c: the whole CPU data path over loopback, one trainer process
 * and an engine node of 1 or 2 processes, against the ceiling measured in the
 * same run: one raw TCP connection moving the same bytes (a writer thread, a
 * reader into a resident buffer). Reports, per configuration:
 *   publish-to-ready: from the start of publish(v) on the trainer until
 *     wsync_receiver_pull returns v on every engine rank (the engine is already
 *     long-polling, so this includes digest, snapshot copy, control round
 *     trips, transfer, fan-out and verification);
 *   pull-only: the engine calls pull(v) once v is published; from that call
 *     to its return (request, transfer, verification);
 *   peak memory (VmHWM) of every process, with the bound it should keep.
 * Variants: staged mode; 2 local ranks (half the chunks land on each and the
 * other half is copied out of the peer's shm window: the fan-out should hide
 * behind the network, so the bench also times that copy + verify alone);
 * a zero-copy trainer (no snapshot in publish); the engine's own tensors
 * (config.dests: one malloc'd buffer per manifest tensor), in place (written
 * through during the pull, the image sparse: setting sparse_image) and
 * staged (copied after verification), whose peak counts the caller's
 * tensors on top of wsync's image(s).
 * The ceiling is measured right before every measured version, by a raw-TCP
 * process the trainer asks and waits for (nothing else runs meanwhile): on a
 * shared, noisy machine a ceiling taken minutes apart from the version it is
 * compared with swings the ratio by +-30 %. Printed: medians of the times
 * (ratio of the medians, as before) and the median of the per-version ratios
 * (each version against the raw run just before it), the fairer figure.
 * Median over the measured versions; both sides keep two slots, so the first
 * two versions are warm-up (each touches one slot's pages for the first time).
 * Usage: e2e_cpu_bench [image bytes, default 1G] [chunk, default 64M]
 *        [configurations, comma-separated, default all: in-place, staged,
 *        fan-out, zero-copy, in-place-dests, staged-dests] */
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/digest/digest.h"
#include "common/model/manifest.h"
#include "common/mem/mem.h"
#include "common/proto/msg.h"
#include "common/base/settings.h"
#include "common/base/util.h"
#include "bench/raw_tcp.h"
#include "engine_side/wsync_receiver.h"
#include "common/control/control_server.h"
#include "trainer_side/wsync_publisher.h"

#define WARMUP 2
#define MEASURED 5
#define NVERS (WARMUP + 2 * MEASURED) /* phase A: warm-up + measured; phase B: measured */
#define MAX_L 2
#define FANOUT_RUNS 3 /* the fan-out copy + verify alone */
#define TIMEOUT_MS 120000

/* Shared between the parent and its children (MAP_SHARED, made before fork). */
typedef struct mem_stat {
    uint64_t hwm, rss_anon, rss_shmem; /* bytes */
} mem_stat_t;

typedef struct shared {
    int waiting[NVERS + 1][MAX_L]; /* engine rank is about to long-poll for v */
    int published[NVERS + 1];
    int ready[NVERS + 1][MAX_L];
    uint64_t t_pub0[NVERS + 1], t_pub1[NVERS + 1];
    uint64_t t_pull0[NVERS + 1][MAX_L], t_ready[NVERS + 1][MAX_L];
    int failed;
    mem_stat_t trainer, engine[MAX_L];
    int raw_want, raw_done; /* raw runs asked for / finished (1-based) */
    int raw_quit;
    double raw_s[NVERS + 1];            /* the raw run right before version v */
    double fanout_alone_s[FANOUT_RUNS]; /* copy + verify of half the image */
} shared_t;

typedef struct bench_cfg {
    uint64_t size, chunk;
    int L;
    wsync_mode_t mode;
    int zero_copy;
    int dests; /* the engine receives into tensors of its own */
    const char *name;
    char url[128];
    char *manifest_json;
} bench_cfg_t;

static shared_t *S;
static double inplace_pull_s; /* pull-only of the 1-rank in-place run, for the fan-out line */

static void spin_until(int *flag)
{
    while (!__atomic_load_n(flag, __ATOMIC_ACQUIRE) && !__atomic_load_n(&S->failed, __ATOMIC_ACQUIRE))
        usleep(200);
}

static void set_flag(int *flag)
{
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
}

static uint64_t status_field(const char *key)
{
    char line[256];
    uint64_t kb = 0;
    size_t klen = strlen(key);
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, klen) == 0 && line[klen] == ':')
            kb = strtoull(line + klen + 1, NULL, 10);
    fclose(f);
    return kb * 1024;
}

static void read_mem(mem_stat_t *m)
{
    m->hwm = status_field("VmHWM");
    m->rss_anon = status_field("RssAnon");
    m->rss_shmem = status_field("RssShmem");
}

static void fail(const char *who, const char *what)
{
    fprintf(stderr, "e2e_cpu_bench: %s: %s: %s\n", who, what, wsync_last_error());
    __atomic_store_n(&S->failed, 1, __ATOMIC_RELEASE);
}

/* --- the ceiling: one raw TCP connection, in its own process --------------- */

/* Serves the trainer's asks for one raw run each (raw_want), until raw_quit. */
static int raw_child(uint64_t len)
{
    char *src = malloc(len), *dst = malloc(len);
    int i, bad = 0;
    if (src == NULL || dst == NULL)
        return 1;
    wsync_fill_pattern(src, len, 0, 7);
    memset(dst, 0, len);
    /* What a second local rank does besides waiting: copy the chunks that
     * landed on its peer (half the image) and verify them. */
    for (i = 0; i < FANOUT_RUNS; i++) {
        double t0 = wsync_now_s();
        volatile uint64_t sink;
        memcpy(dst, src, len / 2);
        sink = wsync_digest_sum(dst, len / 2, 0);
        (void)sink;
        S->fanout_alone_s[i] = wsync_now_s() - t0;
    }
    for (;;) {
        int want = __atomic_load_n(&S->raw_want, __ATOMIC_ACQUIRE);
        if (want > S->raw_done) {
            double t = raw_tcp_once(src, dst, len);
            bad |= t < 0;
            S->raw_s[want] = t;
            __atomic_store_n(&S->raw_done, want, __ATOMIC_RELEASE);
            continue;
        }
        if (__atomic_load_n(&S->raw_quit, __ATOMIC_ACQUIRE))
            break;
        usleep(200);
    }
    return bad || memcmp(src, dst, len) != 0;
}

/* The trainer, before measured version v: one raw run, nothing else moving. */
static void raw_run_before(uint64_t v)
{
    __atomic_store_n(&S->raw_want, (int)v, __ATOMIC_RELEASE);
    while (__atomic_load_n(&S->raw_done, __ATOMIC_ACQUIRE) != (int)v &&
           !__atomic_load_n(&S->failed, __ATOMIC_ACQUIRE))
        usleep(200);
}

/* --- the trainer rank ---------------------------------------------------- */

static int trainer_child(const bench_cfg_t *c)
{
    wsync_publisher_config_t pc = {.control_url = c->url,
                                   .rank = 0,
                                   .world = 1,
                                   .manifest_json = c->manifest_json,
                                   .chunk_size = c->chunk,
                                   .listen = "127.0.0.1:0",
                                   .advertise_host = "127.0.0.1",
                                   .host_id = "bench-trainer-host"};
    wsync_publisher_t *pub = NULL;
    char *src = malloc(c->size);
    uint64_t v;
    int p;
    if (src == NULL)
        return 1;
    pc.image = src;
    pc.zero_copy = c->zero_copy;
    if (wsync_publisher_create(&pc, &pub) != WSYNC_OK) {
        fail("trainer", "create");
        return 1;
    }
    for (v = 1; v <= NVERS; v++) {
        wsync_fill_pattern(src, c->size, 0, v);
        if (v <= WARMUP + MEASURED) {
            /* Phase A: every engine rank is long-polling before we start. */
            for (p = 0; p < c->L; p++)
                spin_until(&S->waiting[v][p]);
        }
        if (v > WARMUP)
            raw_run_before(v);
        if (v <= WARMUP + MEASURED)
            usleep(50000);
        S->t_pub0[v] = wsync_now_ns();
        if (wsync_publisher_publish(pub, v) != WSYNC_OK) {
            fail("trainer", "publish");
            break;
        }
        S->t_pub1[v] = wsync_now_ns();
        set_flag(&S->published[v]);
        for (p = 0; p < c->L; p++)
            spin_until(&S->ready[v][p]);
        if (__atomic_load_n(&S->failed, __ATOMIC_ACQUIRE))
            break;
    }
    read_mem(&S->trainer);
    wsync_publisher_destroy(pub);
    free(src);
    return __atomic_load_n(&S->failed, __ATOMIC_ACQUIRE);
}

/* --- an engine rank ------------------------------------------------------ */

/* The held image equals the trainer's last version, compared chunk by chunk. */
static int check_image(wsync_receiver_t *r, uint64_t size, uint64_t v)
{
    const uint64_t step = 1 << 20;
    char *want = malloc(step), *img = NULL;
    size_t len = 0;
    uint64_t off;
    int bad = want == NULL || wsync_receiver_image(r, (void **)&img, &len) != WSYNC_OK || len != size;
    for (off = 0; !bad && off < size; off += step) {
        uint64_t n = size - off < step ? size - off : step;
        wsync_fill_pattern(want, n, off, v);
        bad = memcmp(want, img + off, n) != 0;
    }
    free(want);
    return bad;
}

/* One buffer per manifest tensor, first touched by the pull (as a fresh
 * engine's parameters would be if allocated lazily; zeroed ones would count
 * the same once written). */
static wsync_dest_tensor_t *make_dests(const bench_cfg_t *c, int *n)
{
    json_t *mj = json_loads(c->manifest_json, 0, NULL);
    wsync_manifest_t *m = NULL;
    wsync_dest_tensor_t *d = NULL;
    size_t i;
    if (mj && wsync_manifest_from_json(mj, &m) == WSYNC_OK && (d = calloc(m->ntensors, sizeof(*d))) != NULL) {
        for (i = 0; i < m->ntensors; i++)
            d[i] = (wsync_dest_tensor_t){.name = strdup(m->tensors[i].name),
                                         .ptr = malloc(m->tensors[i].size),
                                         .nbytes = m->tensors[i].size};
        *n = (int)m->ntensors;
    }
    json_decref(mj);
    wsync_manifest_free(m);
    return d;
}

/* Every destination equals the trainer's version v (its bytes at the tensor's image offset). */
static int check_dests(wsync_receiver_t *r, const wsync_dest_tensor_t *d, int n, uint64_t v)
{
    int i, bad = 0;
    for (i = 0; i < n && !bad; i++) {
        wsync_tensor_info_t info;
        char *want = malloc(d[i].nbytes + 1);
        bad = want == NULL || wsync_receiver_tensor(r, d[i].name, NULL, &info) != WSYNC_OK;
        if (!bad) {
            wsync_fill_pattern(want, d[i].nbytes, info.offset, v);
            bad = memcmp(want, d[i].ptr, d[i].nbytes) != 0;
        }
        free(want);
    }
    return bad;
}

static int engine_child(const bench_cfg_t *c, int rank)
{
    char id[64];
    int nd = 0, i;
    wsync_dest_tensor_t *dests = c->dests ? make_dests(c, &nd) : NULL;
    wsync_receiver_config_t rc = {.control_url = c->url,
                                  .local_rank = rank,
                                  .local_world = c->L,
                                  .mode = c->mode,
                                  .transport = "tcp",
                                  .bind_host = "127.0.0.1",
                                  .host_id = "bench-engine-host"};
    wsync_receiver_t *r = NULL;
    uint64_t v, got = 0;
    snprintf(id, sizeof(id), "bench-%s-%d", c->name, (int)getppid());
    rc.engine_id = id;
    rc.dests = dests;
    rc.ndests = nd;
    if ((c->dests && dests == NULL) || wsync_receiver_create(&rc, &r) != WSYNC_OK) {
        fail("engine", "create");
        return 1;
    }
    for (v = 1; v <= NVERS; v++) {
        wsync_status_t st;
        if (v <= WARMUP + MEASURED) {
            set_flag(&S->waiting[v][rank]);
            S->t_pull0[v][rank] = wsync_now_ns();
            st = wsync_receiver_pull(r, 0, TIMEOUT_MS, &got);
        } else {
            spin_until(&S->published[v]);
            S->t_pull0[v][rank] = wsync_now_ns();
            st = wsync_receiver_pull(r, v, TIMEOUT_MS, &got);
        }
        S->t_ready[v][rank] = wsync_now_ns();
        if (st != WSYNC_OK || got != v) {
            fail("engine", st != WSYNC_OK ? "pull" : "pulled the wrong version");
            break;
        }
        set_flag(&S->ready[v][rank]);
    }
    read_mem(&S->engine[rank]);
    if (!__atomic_load_n(&S->failed, __ATOMIC_ACQUIRE) &&
        ((!(c->dests && c->mode == WSYNC_MODE_IN_PLACE) && check_image(r, c->size, NVERS)) ||
         check_dests(r, dests, nd, NVERS))) {
        fprintf(stderr, "e2e_cpu_bench: engine rank %d holds bytes that differ from version %d\n", rank, NVERS);
        __atomic_store_n(&S->failed, 1, __ATOMIC_RELEASE);
    }
    wsync_receiver_destroy(r);
    for (i = 0; i < nd; i++) {
        free((char *)dests[i].name);
        free(dests[i].ptr);
    }
    free(dests);
    return __atomic_load_n(&S->failed, __ATOMIC_ACQUIRE);
}

/* --- the parent ---------------------------------------------------------- */

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_dbl);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int wait_all(pid_t *pids, int n)
{
    int i, bad = 0, status;
    for (i = 0; i < n; i++) {
        if (waitpid(pids[i], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            bad = 1;
        if (bad)
            __atomic_store_n(&S->failed, 1, __ATOMIC_RELEASE);
    }
    return bad;
}

static void print_mem(const char *who, const mem_stat_t *m, uint64_t bound, const char *bound_text)
{
    printf("  peak memory %-14s VmHWM %7.1f MiB (RssAnon %7.1f, RssShmem %7.1f at the end)", who,
           m->hwm / 1048576.0, m->rss_anon / 1048576.0, m->rss_shmem / 1048576.0);
    if (bound)
        printf("  bound %s = %.1f MiB: %s", bound_text, bound / 1048576.0, m->hwm <= bound ? "holds" : "EXCEEDED");
    printf("\n");
}

/* The ceiling in a child of its own, so its buffers count in no one's peak. */
static pid_t start_raw(uint64_t len)
{
    pid_t raw = fork();
    if (raw == 0)
        _exit(raw_child(len));
    return raw;
}

static int stop_raw(pid_t raw)
{
    int status;
    __atomic_store_n(&S->raw_quit, 1, __ATOMIC_RELEASE);
    if (raw < 0 || waitpid(raw, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "e2e_cpu_bench: the raw TCP runs failed\n");
        return 1;
    }
    return 0;
}

static int run_config(bench_cfg_t *c)
{
    wsync_control_server_config_t sc = {.listen = "127.0.0.1:0"};
    wsync_control_server_t *server = NULL;
    pid_t pids[1 + MAX_L], raw;
    double e2e[MEASURED], pull[MEASURED], pub[MEASURED], raw_s[2 * MEASURED], r_e2e[MEASURED], r_pull[MEASURED];
    double raw_med, m_e2e, m_pull, m_pub;
    int i, p, bad;
    uint64_t v;

    memset(S, 0, sizeof(*S));
    raw = start_raw(c->size);
    if (wsync_control_server_start(&sc, &server) != WSYNC_OK) {
        fprintf(stderr, "e2e_cpu_bench: control endpoint: %s\n", wsync_last_error());
        stop_raw(raw);
        return 1;
    }
    snprintf(c->url, sizeof(c->url), "%s", wsync_control_server_url(server));
    for (p = 0; p < c->L; p++)
        if ((pids[1 + p] = fork()) == 0)
            _exit(engine_child(c, p));
    if ((pids[0] = fork()) == 0)
        _exit(trainer_child(c));
    bad = wait_all(pids, 1 + c->L);
    wsync_control_server_stop(server);
    bad |= stop_raw(raw);
    if (bad) {
        fprintf(stderr, "e2e_cpu_bench: %s: a process failed (messages above)\n", c->name);
        return 1;
    }

    for (i = 0; i < MEASURED; i++) {
        uint64_t va = WARMUP + 1 + (uint64_t)i, vb = WARMUP + MEASURED + 1 + (uint64_t)i, ea = 0, eb = 0;
        for (p = 0; p < c->L; p++) {
            ea = S->t_ready[va][p] > ea ? S->t_ready[va][p] : ea;
            if (S->t_ready[vb][p] - S->t_pull0[vb][p] > eb)
                eb = S->t_ready[vb][p] - S->t_pull0[vb][p];
        }
        e2e[i] = (double)(ea - S->t_pub0[va]) / 1e9;
        pull[i] = (double)eb / 1e9;
        pub[i] = (double)(S->t_pub1[vb] - S->t_pub0[vb]) / 1e9;
        r_e2e[i] = S->raw_s[va] / e2e[i];
        r_pull[i] = S->raw_s[vb] / pull[i];
        raw_s[2 * i] = S->raw_s[va];
        raw_s[2 * i + 1] = S->raw_s[vb];
    }
    raw_med = median(raw_s, 2 * MEASURED);
    m_e2e = median(e2e, MEASURED);
    m_pull = median(pull, MEASURED);
    m_pub = median(pub, MEASURED);
    v = c->size;
    printf("%s: image %llu bytes, chunk %llu MiB, 1 trainer rank%s -> 1 engine node x %d local rank%s, %s "
           "mode%s\n",
           c->name, (unsigned long long)v, (unsigned long long)(c->chunk >> 20), c->zero_copy ? " (zero-copy)" : "",
           c->L, c->L > 1 ? "s" : "", c->mode == WSYNC_MODE_IN_PLACE ? "in-place" : "staged",
           c->dests ? ", into the engine's own tensors (dests)" : "");
    printf("  raw tcp, 1 connection (ceiling, median of %d, one run before each version): %6.2f GB/s  (%.3f s)\n",
           2 * MEASURED, v / raw_med / 1e9, raw_med);
    printf("  publish-to-ready (median of %d):             %6.2f GB/s  (%.3f s)  ratio %.2f;"
           "  per-version ratio median %.2f\n",
           MEASURED, v / m_e2e / 1e9, m_e2e, raw_med / m_e2e, median(r_e2e, MEASURED));
    printf("  pull-only, request to verified (median of %d): %6.2f GB/s  (%.3f s)  ratio %.2f;"
           "  per-version ratio median %.2f\n",
           MEASURED, v / m_pull / 1e9, m_pull, raw_med / m_pull, median(r_pull, MEASURED));
    printf("  publish() alone: %-28s %6.2f GB/s  (%.3f s)\n",
           c->zero_copy ? "digest + report:" : "digest + report + copy:", v / m_pub / 1e9, m_pub);
    if (c->L == 1 && c->mode == WSYNC_MODE_IN_PLACE && !c->zero_copy)
        inplace_pull_s = m_pull;
    if (c->L == 2 && inplace_pull_s > 0) {
        double fo = median(S->fanout_alone_s, FANOUT_RUNS);
        printf("  fan-out alone (copy + verify half the image, 1 thread): %.3f s; 1-rank pull-only %.3f s;\n"
               "    serial sum %.3f s vs 2-rank pull-only %.3f s: %.0f%% of the fan-out hidden\n",
               fo, inplace_pull_s, inplace_pull_s + fo, m_pull, 100.0 * (inplace_pull_s + fo - m_pull) / fo);
    }
    print_mem("trainer", &S->trainer, 0, NULL);
    printf("    (trainer holds its source image%s: expected ~%d x image)\n",
           c->zero_copy ? " only (zero-copy)" : " and two publish slots", c->zero_copy ? 1 : 3);
    for (p = 0; p < c->L; p++) {
        char who[32];
        /* with dests the caller's tensors (about one image) come on top; they
         * hold every tensor, so staged keeps one image (the held version is
         * in them) */
        int one = c->mode == WSYNC_MODE_IN_PLACE || c->dests;
        /* in place into them the image is sparse (release.h): no image at all */
        int sparse = c->dests && c->mode == WSYNC_MODE_IN_PLACE && wsync_setting_int(WSYNC_SET_SPARSE_IMAGE);
        uint64_t bound = (sparse ? 0 : one ? c->size : 2 * c->size) + (c->dests ? c->size : 0) + 2 * c->chunk;
        snprintf(who, sizeof(who), "engine rank %d", p);
        if (c->L == 1)
            print_mem(who, &S->engine[p], bound,
                      sparse     ? "tensors+2 chunks (sparse image)"
                      : c->dests ? "image+tensors+2 chunks"
                      : one      ? "image+2 chunks"
                                 : "2 images+2 chunks");
        else
            print_mem(who, &S->engine[p], 0, NULL);
    }
    if (c->L > 1)
        printf("    (with %d local ranks, a rank's RSS also counts the pages of the peers' windows it maps and "
               "reads: shared, not extra memory)\n",
               c->L);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    bench_cfg_t cfg = {.size = 1ull << 30, .chunk = 64ull << 20};
    static const struct {
        int L;
        wsync_mode_t mode;
        int zero_copy, dests;
        const char *name;
    } runs[] = {
        {1, WSYNC_MODE_IN_PLACE, 0, 0, "in-place"},       {1, WSYNC_MODE_STAGED, 0, 0, "staged"},
        {2, WSYNC_MODE_IN_PLACE, 0, 0, "fan-out"},        {1, WSYNC_MODE_IN_PLACE, 1, 0, "zero-copy"},
        {1, WSYNC_MODE_IN_PLACE, 0, 1, "in-place-dests"}, {1, WSYNC_MODE_STAGED, 0, 1, "staged-dests"},
    };
    const char *only = argc > 3 ? argv[3] : NULL;
    wsync_manifest_t *m = NULL;
    json_t *mj = NULL;
    size_t i;
    int rc = 0;

    if ((argc > 1 && wsync_parse_size(argv[1], "the image size", &cfg.size) != WSYNC_OK) ||
        (argc > 2 && wsync_parse_size(argv[2], "the chunk size", &cfg.chunk) != WSYNC_OK)) {
        fprintf(stderr, "e2e_cpu_bench: %s\nusage: e2e_cpu_bench [SIZE=1G] [CHUNK=64M] [CONFIG,...]\n",
                wsync_last_error());
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    S = mmap(NULL, sizeof(*S), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (S == MAP_FAILED) {
        perror("e2e_cpu_bench: mmap");
        return 1;
    }
    if (wsync_manifest_synthetic(cfg.size, &m) != WSYNC_OK || wsync_manifest_to_json(m, &mj) != WSYNC_OK ||
        (cfg.manifest_json = json_dumps(mj, JSON_COMPACT)) == NULL) {
        fprintf(stderr, "e2e_cpu_bench: manifest: %s\n", wsync_last_error());
        return 1;
    }
    cfg.size = m->image_size;
    json_decref(mj);
    wsync_manifest_free(m);
    for (i = 0; i < sizeof(runs) / sizeof(runs[0]) && rc == 0; i++) {
        char want[256];
        snprintf(want, sizeof(want), ",%s,", runs[i].name);
        if (only) { /* a comma-separated list of configuration names */
            char have[1024];
            snprintf(have, sizeof(have), ",%s,", only);
            if (strstr(have, want) == NULL)
                continue;
        }
        cfg.dests = runs[i].dests;
        cfg.L = runs[i].L;
        cfg.mode = runs[i].mode;
        cfg.zero_copy = runs[i].zero_copy;
        cfg.name = runs[i].name;
        rc = run_config(&cfg);
    }
    free(cfg.manifest_json);
    munmap(S, sizeof(*S));
    return rc;
}
