/* engine.c: `wsync engine`, an engine rank stand-in: pulls versions as they
 * are published, holds them verified, and optionally dumps each one as a
 * safetensors file with the original names, dtypes and shapes. */
#include <errno.h>
#include <stdarg.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "common/base/checks.h"
#include "common/model/manifest.h"
#include "common/mem/mem.h"
#include "common/net/auth.h"
#include "common/model/safetensors.h"
#include "common/base/util.h"
#include "engine_side/receiver_cli.h"
#include "engine_side/wsync_receiver.h"

/* The bound the TP options of every command share; the receiver refuses a
 * node of more local ranks than its board holds, saying how many. */
#define ENGINE_MAX_LOCAL 4096

static volatile sig_atomic_t stop_flag;

/* SIGINT/SIGTERM: the loops here stop, and every wait inside the library
 * (retries of the control endpoint, long polls, a pull) returns at once. */
static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
    wsync_interrupt();
}

typedef struct watcher {
    wsync_receiver_t *r;
    const char *engine;
    int slots; /* image slots per rank: 2 staged, 1 in place */
    int tty;   /* stdout is a terminal: one line, rewritten in place */
    int stop;  /* atomic */
} watcher_t;

/* One progress note: on a terminal the line is rewritten in place (kept
 * short, so it never wraps); otherwise a plain line. */
static void watch_note(const watcher_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void watch_note(const watcher_t *w, const char *fmt, ...)
{
    va_list ap;
    flockfile(stdout);
    fputs(w->tty ? "\r\033[K" : "", stdout);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fputs(w->tty ? "" : "\n", stdout);
    fflush(stdout);
    funlockfile(stdout);
}

/* Why the set-up reserves what it does: a whole line, once per set-up. */
static void watch_setup_reason(const watcher_t *w, const wsync_pull_progress_t *p)
{
    char a[32], b[32];
    wsync_fmt_size(p->total, a, sizeof(a));
    wsync_fmt_size(p->total / (uint64_t)(w->slots > 0 ? w->slots : 1), b, sizeof(b));
    flockfile(stdout);
    printf("%sengine %s: setting up: reserving %s of image memory (first pull, version %llu): ",
           w->tty ? "\r\033[K" : "", w->engine, a, (unsigned long long)p->version);
    if (w->slots > 1)
        printf("%d slots of %s each, as staged mode keeps the held version readable while the next one lands\n",
               w->slots, b);
    else
        printf("one slot of %s, in place\n", b);
    fflush(stdout);
    funlockfile(stdout);
}

/* Local rank 0: progress of any phase of a pull that lasts longer than a
 * second (reserving the images, landing), so a long wait says what it
 * waits for: on a terminal one line updated every half second, otherwise a
 * line every 5 s. */
static void *watch_main(void *arg)
{
    watcher_t *w = arg;
    int tick = 0, every = w->tty ? 5 : 50, open = 0, fresh = 1;
    uint64_t said_setup = UINT64_MAX;
    while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
        wsync_pull_progress_t p;
        char a[32], b[32];
        usleep(100000); /* short naps: the engine exits without waiting */
        wsync_receiver_progress(w->r, &p);
        if (strcmp(p.phase, "idle") == 0 || p.elapsed_s < 1.0) {
            if (open && w->tty)
                watch_note(w, "%s", "");
            open = 0;
            fresh = 1; /* the next phase past a second says so at once */
            continue;
        }
        if (strcmp(p.phase, "setup") == 0 && said_setup != p.version) {
            said_setup = p.version; /* the reason stands for the first note */
            watch_setup_reason(w, &p);
            fresh = tick = 0;
            continue;
        }
        if (!fresh && ++tick % every != 0)
            continue;
        fresh = tick = 0;
        open = 1;
        if (strcmp(p.phase, "setup") == 0)
            watch_note(w, "engine %s: setting up image memory: %.0f s", w->engine, p.elapsed_s);
        else
            watch_note(w, "engine %s: version %llu: %s of %s landed and verified (%.0f s)", w->engine,
                       (unsigned long long)p.version, wsync_fmt_size(p.done, a, sizeof(a)),
                       wsync_fmt_size(p.total, b, sizeof(b)), p.elapsed_s);
    }
    if (open && w->tty)
        watch_note(w, "%s", "");
    return NULL;
}

/* --follow: a failure that repeats -- a trainer rank gone, the failed
 * version retried every ~2 s until the rank is back or a newer version is
 * published -- is said once, naming the rank, then once a FOLLOW_REMIND_S
 * at most: a dead trainer made a line every 2 s before (26 item 3). */
#define FOLLOW_REMIND_S 60

typedef struct quiet {
    char key[256]; /* what failed: "trainer rank N" with the status, else the error with its digits left out */
    double said_s; /* when the last line about it went out */
    double since_s;
    int repeats; /* failures since that line */
} quiet_t;

/* "trainer rank N" as the error writes it (N's digits as text: a key and a
 * name to print, not a number to compute with), or "" if it names none. */
static void rank_words(const char *err, char *out, size_t len)
{
    const char *rank = err ? strstr(err, "trainer rank ") : NULL;
    size_t n = rank ? strlen("trainer rank ") : 0;
    if (rank == NULL) {
        snprintf(out, len, "%s", "");
        return;
    }
    while (rank[n] >= '0' && rank[n] <= '9')
        n++;
    snprintf(out, len, "%.*s", (int)n, rank);
}

static void failure_key(wsync_status_t st, const char *err, char *key, size_t len)
{
    char rank[64];
    size_t n = (size_t)snprintf(key, len, "%d:", (int)st);
    rank_words(err, rank, sizeof(rank));
    if (rank[0]) {
        snprintf(key + n, len - n, "%s", rank);
        return;
    }
    for (; *err && n + 1 < len; err++)
        if (*err < '0' || *err > '9')
            key[n++] = *err;
    key[n] = '\0';
}

static void report_failure(quiet_t *q, int follow, const char *engine, int rank, wsync_status_t st)
{
    const char *err = wsync_last_error();
    char key[sizeof(q->key)], gone[64];
    double now = wsync_now_s();
    if (!follow) {
        fprintf(stderr, "wsync engine %s rank %d: pull failed: %s: %s\n", engine, rank, wsync_status_str(st), err);
        return;
    }
    failure_key(st, err, key, sizeof(key));
    rank_words(err, gone, sizeof(gone));
    if (strcmp(key, q->key) != 0) {
        snprintf(q->key, sizeof(q->key), "%s", key);
        q->said_s = q->since_s = now;
        q->repeats = 0;
        fprintf(stderr, "wsync engine %s rank %d: pull failed: %s: %s\n", engine, rank, wsync_status_str(st), err);
        if (st == WSYNC_ERR_PEER && gone[0])
            fprintf(stderr,
                    "wsync engine %s rank %d: %s is gone; waiting for it to come back or for a newer "
                    "version (retrying quietly, a line every %d s while it lasts)\n",
                    engine, rank, gone, FOLLOW_REMIND_S);
        return;
    }
    q->repeats++;
    if (now - q->said_s < FOLLOW_REMIND_S)
        return;
    fprintf(stderr, "wsync engine %s rank %d: still failing for %.0f s (%d more attempts): %s: %s\n", engine, rank,
            now - q->since_s, q->repeats, wsync_status_str(st), err);
    q->said_s = now;
    q->repeats = 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: wsync engine --control URL --engine ID --local-rank R --local-world L\n"
               "                    [--mode staged|in-place] [--dump DIR] [--follow | --versions N]\n"
               "                    [--device host|cuda:N] [--transport auto|tcp|nccl|verbs|local] [--bind HOST]\n"
               "                    [--timeout-ms MS] [--host-id ID] [--max-failures K] [--token-file FILE]\n"
               "                    [--tp T [--rules FILE] | --target FILE.json] [--plan auto|direct|relay:F]\n"
               "                    [--config FILE] [--set SETTING=VALUE]...\n"
               "Pulls the newest version whenever one is published; exits 0 after holding N versions\n"
               "(default 1), or runs until interrupted with --follow. A failed pull is reported and retried;\n"
               "without --follow, K failures in a row (default 5) end it with status 1; with --follow, a failure\n"
               "that repeats (a trainer rank gone) is said once, then at most once a minute.\n"
               "  --engine ID      the node's name, 1 to 64 characters; every local rank gives the same\n"
               "  --timeout-ms MS  how long one pull may take, the wait for a new version included\n"
               "                   (default 120000)\n"
               "  --dump DIR       write each verified version to DIR/<engine>/rank<R>/v<version>.safetensors\n"
               "                   (with a target: the rank's destination tensors, under their names)\n"
               "  --tp T           hold the slices of TP rank R mod T of the rules (docs/TARGETS.md); every\n"
               "                   local rank of the node gives the same T and rules\n"
               "  --rules FILE     rules for --tp (default: the built-in vLLM rules)\n"
               "  --target F       hold exactly the target in F (JSON, docs/TARGETS.md)\n"
               "  --plan P         the plan setting: direct (from the trainer ranks), relay:F (through other\n"
               "                   engine nodes, trees of fan-out F; whole-image host nodes), auto (default)\n"
               "  --config FILE    read settings and these options from FILE's \"engine\" object\n"
               "                   (docs/CONFIG.md; flags given here override the file)\n"
               "  --token-file FILE  the deployment's token (default: setting token, env WSYNC_TOKEN); pulls and\n"
               "                   puts prove it (docs/SECURITY.md)\n");
}

static int mkdirs(const char *path)
{
    char buf[1024];
    size_t i;
    snprintf(buf, sizeof(buf), "%s", path);
    for (i = 1; buf[i]; i++)
        if (buf[i] == '/') {
            buf[i] = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return -1;
            buf[i] = '/';
        }
    return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

/* Each held tensor (the destination tensors with a target) as a file. */
static wsync_status_t dump(wsync_receiver_t *r, const char *dir, const char *engine, int rank, uint64_t v)
{
    char path[1100], sub[1024];
    size_t n = wsync_receiver_tensor_count(r), i, len = 0;
    wsync_st_tensor_t *ts = calloc(n + 1, sizeof(*ts));
    wsync_tensor_info_t *info = calloc(n + 1, sizeof(*info));
    void *host = NULL;
    const void *img = NULL;
    wsync_status_t st = WSYNC_OK;

    if (ts == NULL || info == NULL) {
        st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        goto out;
    }
    snprintf(sub, sizeof(sub), "%s/%s/rank%d", dir, engine, rank);
    if (mkdirs(sub) != 0) {
        st = wsync_error(WSYNC_ERR_IO, "cannot create %s: %s", sub, strerror(errno));
        goto out;
    }
    snprintf(path, sizeof(path), "%s/v%llu.safetensors", sub, (unsigned long long)v);
    WSYNC_CHECK_GOTO(recv_cli_host_image(r, &host, &img, &len), st, out); /* GPU memory: a host copy */
    for (i = 0; i < n; i++) {
        WSYNC_CHECK_GOTO(wsync_receiver_tensor_at(r, i, NULL, &info[i]), st, out);
        wsync_dtype_parse(info[i].dtype, &ts[i].dtype);
        ts[i] = (wsync_st_tensor_t){.name = info[i].name,
                                    .dtype = ts[i].dtype,
                                    .ndim = info[i].ndim,
                                    .shape = info[i].shape,
                                    .data = (const char *)img + info[i].offset};
    }
    st = wsync_safetensors_write_tensors(path, n, ts, recv_cli_metadata(r));
out:
    free(host);
    free(ts);
    free(info);
    return st;
}

/* A whole (small) file as a string, for --rules and --target. */
static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (f == NULL) {
        wsync_error(WSYNC_ERR_IO, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) != NULL && fread(buf, 1, (size_t)n, f) == (size_t)n) {
        buf[n] = '\0';
    } else {
        free(buf);
        buf = NULL;
        wsync_error(WSYNC_ERR_IO, "%s: cannot read it", path);
    }
    fclose(f);
    return buf;
}

const struct option cli_engine_options[] =
    {{"control", 1, 0, 'c'},     {"engine", 1, 0, 'e'},       {"local-rank", 1, 0, 'r'},
     {"local-world", 1, 0, 'w'}, {"mode", 1, 0, 'm'},         {"dump", 1, 0, 'D'},
     {"follow", 0, 0, 'F'},      {"versions", 1, 0, 'n'},     {"device", 1, 0, 'd'},
     {"transport", 1, 0, 't'},   {"bind", 1, 0, 'b'},         {"timeout-ms", 1, 0, 'T'},
     {"host-id", 1, 0, 'H'},     {"max-failures", 1, 0, 'x'}, {"tp", 1, 0, 'P'},
     {"rules", 1, 0, 'R'},       {"target", 1, 0, 'G'},       {"token-file", 1, 0, 'K'},
     {"plan", 1, 0, 'p'},        {"help", 0, 0, 'h'},         {0, 0, 0, 0}};

/* The options of `wsync engine`. */
typedef struct engine_args {
    wsync_receiver_config_t cfg;
    const char *dumpdir, *rules_path, *target_path;
    long versions, timeout_ms;
    int follow, max_failures;
} engine_args_t;

#define ENGINE_GO (-1) /* parse_args: carry on (else the exit status) */

static int parse_args(int argc, char **argv, engine_args_t *a)
{
    static char token[512];
    int o;
    optind = 1;
    while ((o = getopt_long(argc, argv, "", cli_engine_options, NULL)) != -1) {
        switch (o) {
        case 'c': a->cfg.control_url = optarg; break;
        case 'e': a->cfg.engine_id = optarg; break;
        case 'r':
            if (cli_parse_int("engine", "--local-rank", optarg, 0, ENGINE_MAX_LOCAL - 1, &a->cfg.local_rank))
                return 2;
            break;
        case 'w':
            if (cli_parse_int("engine", "--local-world", optarg, 1, ENGINE_MAX_LOCAL, &a->cfg.local_world))
                return 2;
            break;
        case 'm':
            if (strcmp(optarg, "staged") == 0)
                a->cfg.mode = WSYNC_MODE_STAGED;
            else if (strcmp(optarg, "in-place") == 0)
                a->cfg.mode = WSYNC_MODE_IN_PLACE;
            else {
                fprintf(stderr, "wsync engine: --mode must be staged or in-place\n");
                return 2;
            }
            break;
        case 'D': a->dumpdir = optarg; break;
        /* The later of --follow / --versions wins (a flag over a file's). */
        case 'F': a->follow = 1; break;
        case 'n':
            if (cli_parse_long("engine", "--versions", optarg, 1, INT_MAX, &a->versions))
                return 2;
            a->follow = 0;
            break;
        case 'd': a->cfg.device = optarg; break;
        case 't': a->cfg.transport = optarg; break;
        case 'b': a->cfg.bind_host = optarg; break;
        case 'T':
            if (cli_parse_long("engine", "--timeout-ms", optarg, 1, INT_MAX, &a->timeout_ms))
                return 2;
            break;
        case 'H': a->cfg.host_id = optarg; break;
        case 'x':
            if (cli_parse_int("engine", "--max-failures", optarg, 1, INT_MAX, &a->max_failures))
                return 2;
            break;
        case 'P':
            if (cli_parse_int("engine", "--tp", optarg, 1, ENGINE_MAX_LOCAL, &a->cfg.tp_size))
                return 2;
            break;
        case 'R': a->rules_path = optarg; break;
        case 'G': a->target_path = optarg; break;
        case 'K':
            if (wsync_auth_read_token_file(optarg, token, sizeof(token)) != WSYNC_OK) {
                fprintf(stderr, "wsync engine: %s\n", wsync_last_error());
                return 2;
            }
            a->cfg.token = token;
            break;
        case 'p':
            if (cli_set_plan("engine", optarg))
                return 2;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (a->cfg.control_url == NULL || a->cfg.engine_id == NULL || a->cfg.local_world < 1 ||
        a->cfg.local_rank < 0 || a->cfg.local_rank >= a->cfg.local_world || a->versions < 1 || a->timeout_ms < 1) {
        fprintf(stderr, "wsync engine: need --control URL, --engine ID, --local-rank R < --local-world L\n");
        usage(stderr);
        return 2;
    }
    if (a->cfg.tp_size < 0 || (a->rules_path && a->cfg.tp_size < 1) || (a->target_path && a->cfg.tp_size > 0)) {
        fprintf(stderr, "wsync engine: --tp T must be >= 1, --rules goes with --tp, and --target excludes --tp\n");
        return 2;
    }
    return ENGINE_GO;
}

int cmd_engine(int argc, char **argv)
{
    engine_args_t args = {.cfg = {.local_rank = -1, .local_world = 0, .mode = WSYNC_MODE_STAGED},
                          .versions = 1,
                          .timeout_ms = 120000,
                          .max_failures = 5};
    wsync_receiver_config_t rc_cfg;
    wsync_receiver_t *r = NULL;
    watcher_t watch = {0};
    pthread_t watcher;
    int watching = 0;
    const char *dumpdir = NULL, *rules_path = NULL, *target_path = NULL;
    char *rules_text = NULL, *target_text = NULL;
    long versions, timeout_ms;
    int o, follow, held = 0, rc = 1, failures_in_row = 0, max_failures;
    quiet_t quiet = {.key = ""};
    wsync_status_t st;

    if ((o = cli_config_apply("engine", &argc, &argv)) != 0)
        return o;
    if ((o = parse_args(argc, argv, &args)) != ENGINE_GO)
        return o;
    rc_cfg = args.cfg;
    dumpdir = args.dumpdir;
    rules_path = args.rules_path;
    target_path = args.target_path;
    versions = args.versions;
    timeout_ms = args.timeout_ms;
    follow = args.follow;
    max_failures = args.max_failures;
    if ((rules_path && (rules_text = read_text(rules_path)) == NULL) ||
        (target_path && (target_text = read_text(target_path)) == NULL)) {
        cli_report("engine", "bad input", WSYNC_ERR_IO);
        free(rules_text);
        return 2;
    }
    rc_cfg.rules_json = rules_text;
    rc_cfg.target_json = target_text;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);
    if ((st = wsync_receiver_create(&rc_cfg, &r)) != WSYNC_OK) {
        cli_report("engine", "cannot start", st);
        free(rules_text);
        free(target_text);
        return st == WSYNC_ERR_INVALID || st == WSYNC_ERR_FORMAT ? 2 : 1;
    }
    watch = (watcher_t){.r = r,
                        .engine = rc_cfg.engine_id,
                        .slots = rc_cfg.mode == WSYNC_MODE_IN_PLACE ? 1 : 2,
                        .tty = isatty(STDOUT_FILENO)};
    if (rc_cfg.local_rank == 0)
        watching = pthread_create(&watcher, NULL, watch_main, &watch) == 0;
    while (!stop_flag && (follow || held < versions)) {
        uint64_t v = 0;
        st = wsync_receiver_pull(r, 0, (int)timeout_ms, &v);
        /* Following, nothing new is no failure: rank 0 waited for a version,
         * ranks > 0 for rank 0 to start a pull (a rank 0 that is gone is
         * noticed by the rejoin, with an error of its own). */
        if (st == WSYNC_ERR_TIMEOUT && follow &&
            (strstr(wsync_last_error(), "no version newer") ||
             strstr(wsync_last_error(), "started no pull in time")))
            continue;
        if (st != WSYNC_OK && stop_flag)
            break; /* interrupted: not a failure */
        if (st != WSYNC_OK) {
            report_failure(&quiet, follow, rc_cfg.engine_id, rc_cfg.local_rank, st);
            /* --versions N gives up after a few failures in a row; --follow
             * keeps trying, as an engine in service would. */
            if (stop_flag || (!follow && ++failures_in_row >= max_failures))
                break;
            usleep(200000);
            continue;
        }
        held++;
        failures_in_row = 0;
        quiet.key[0] = '\0'; /* the next failure is said again */
        if (rc_cfg.local_rank == 0) {
            /* The pull alone: the first pull's set-up ran before it. */
            double secs = recv_cli_last_pull_s(r);
            wsync_pull_progress_t p;
            void *img;
            size_t len = 0;
            wsync_receiver_image(r, &img, &len);
            wsync_receiver_progress(r, &p);
            if (watch.tty)
                printf("\r\033[K"); /* over the progress line */
            printf("engine %s: version %llu ready on %d rank%s in %.3f s (%.2f GB/s per rank; rank 0's image %zu "
                   "bytes",
                   rc_cfg.engine_id, (unsigned long long)v, rc_cfg.local_world, rc_cfg.local_world == 1 ? "" : "s",
                   secs, secs > 0 ? (double)len / secs / 1e9 : 0.0, len);
            if (held == 1 && p.last_setup_s > 0)
                printf("; image memory set up before it in %.2f s", p.last_setup_s);
            printf(")\n");
            fflush(stdout);
        }
        if (dumpdir && (st = dump(r, dumpdir, rc_cfg.engine_id, rc_cfg.local_rank, v)) != WSYNC_OK) {
            cli_report("engine", "dump failed", st);
            goto out;
        }
    }
    rc = held >= versions || follow ? 0 : 1;
out:
    __atomic_store_n(&watch.stop, 1, __ATOMIC_RELEASE);
    if (watching)
        pthread_join(watcher, NULL);
    wsync_receiver_destroy(r);
    free(rules_text);
    free(target_text);
    return rc;
}
