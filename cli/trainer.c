/* trainer.c: `wsync trainer`, a trainer rank stand-in: owns its rank's share
 * of a model's image and publishes versions of it (synthetic content that
 * differs per version, or safetensors files in turn). */
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model.h"
#include "common/control/client.h"
#include "common/base/checks.h"
#include "common/base/interrupt.h"
#include "common/mem/mem.h"
#include "common/net/auth.h"
#include "common/base/util.h"
#include "trainer_side/wsync_publisher.h"

/* The control endpoint takes worlds up to 4096 ranks; an interval past an
 * hour is a typo. */
#define TRAINER_MAX_WORLD 4096
#define TRAINER_MAX_INTERVAL_MS 3600000

static volatile sig_atomic_t stop_flag;

/* SIGINT/SIGTERM: the loops here stop, and every wait inside the library
 * (retries of the control endpoint, long polls, a pull) returns at once. */
static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
    wsync_interrupt();
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: wsync trainer --control URL --rank R --world W (--synthetic SIZE | --safetensors F1[,F2...])\n"
            "                     [--versions N] [--interval-ms MS] [--wait-engines M] [--serve HOST:PORT]\n"
            "                     [--listen HOST:PORT] [--advertise HOST] [--device host|cuda:N] [--chunk SIZE]\n"
            "                     [--layout even|fsdp] [--zero-copy] [--single-copy] [--hold-timeout-ms MS]\n"
            "                     [--host-id ID] [--exit-after-publish]\n"
            "                     [--token-file FILE]\n"
            "                     [--config FILE] [--set SETTING=VALUE]...\n"
            "Publishes N versions (default 3) of its rank's share of the model, then keeps serving pulls\n"
            "until interrupted. Version numbers continue from the newest published one; ranks step\n"
            "together (version v+1 waits until every rank published v).\n"
            "  --listen HOST:PORT where this rank serves pulls (default 0.0.0.0:0: every address, any port)\n"
            "  --advertise HOST   the host engines dial (default: --listen's host when it names one\n"
            "                     address, else this machine's primary IPv4)\n"
            "  --interval-ms MS   pause between versions (default 0)\n"
            "  --chunk SIZE       the unit a version is cut into, sent and verified (default 64M)\n"
            "  --layout L         even: equal byte ranges per rank; fsdp: every tensor split across ranks\n"
            "  --wait-engines M   before publishing the next version, wait until M engines hold the last\n"
            "  --serve HOST:PORT  also run the control endpoint in this process (rank 0)\n"
            "  --single-copy      publish each version single-copy: engines copy it straight out of this\n"
            "                     rank's memory; the next version is written only once the engine nodes on\n"
            "                     this host hold it (wsync_publisher_wait_held), or after --hold-timeout-ms\n"
            "                     (default 10000). --zero-copy: single copy too, without any publish slot\n"
            "                     and without the wait (engines still pulling a version when the next is\n"
            "                     written fail it, their digests catching it)\n"
            "  --config FILE      read settings and these options from FILE's \"trainer\" object\n"
            "                     (docs/CONFIG.md; flags given here override the file)\n"
            "  --token-file FILE  the deployment's token (default: setting token, env WSYNC_TOKEN): engines\n"
            "                     must prove it to pull; without one anyone who reaches the pull port can\n"
            "                     (docs/SECURITY.md)\n");
}

/* Version v of image bytes [off, off+len) into `dst`, which lives where `mem`
 * keeps memory: synthetic content is generated there directly (the GPU fill
 * kernel writes the bytes wsync_fill_pattern does); file content is read into
 * the host buffer `stage` (len bytes at least) and copied over. */
static wsync_status_t fill_extent(const cli_model_t *m, const wsync_mem_ops_t *mem, uint64_t v, void *dst,
                                  uint64_t off, uint64_t len, void *stage)
{
    if (mem->kind == WSYNC_MEM_HOST)
        return cli_model_fill(m, v, dst, off, len);
    if (m->nfiles == 0)
        return mem->fill(dst, len, off, v);
    WSYNC_CHECK(cli_model_fill(m, v, stage, off, len));
    return mem->copy(dst, stage, len);
}

/* Wait until `engines` engine nodes report `version` ready (or newer). */
static int wait_engines(wsync_control_t *c, int engines, uint64_t version)
{
    while (!stop_flag) {
        json_t *st = NULL, *e;
        size_t i;
        int ready = 0;
        if (wsync_control_status(c, &st) == WSYNC_OK) {
            json_array_foreach(json_object_get(st, "engines"), i,
                               e) if ((uint64_t)json_integer_value(json_object_get(e, "version")) >= version)
                ready++;
            json_decref(st);
        }
        if (ready >= engines)
            return 0;
        usleep(20000);
    }
    return 1;
}

/* Until version v is published (all ranks reported it), or interrupted;
 * the publisher sends this rank's report again if a restarted endpoint lost
 * it. 1 when interrupted, -1 when the endpoint stayed away past the grace
 * period. */
static int wait_published(wsync_publisher_t *pub, uint64_t v)
{
    while (!stop_flag) {
        wsync_status_t st = wsync_publisher_wait_published(pub, v, 500);
        if (st == WSYNC_OK)
            return 0;
        if (st != WSYNC_ERR_TIMEOUT)
            return -1;
    }
    return 1;
}

/* Single copy: until the engine nodes on this host hold v (or the
 * timeout), then at once the next version's bytes, where engines read v
 * from: what a trainer's next optimizer step does. */
static wsync_status_t hold_then_write(wsync_publisher_t *pub, const cli_model_t *model, const wsync_mem_ops_t *mem,
                                      uint64_t v, const wsync_owned_t *owned, int n, void *stage, long hold_ms)
{
    uint64_t t0 = wsync_now_ns();
    wsync_status_t st = wsync_publisher_wait_held(pub, v, (int)hold_ms);
    int k;
    if (st == WSYNC_OK)
        printf("trainer: version %llu held by the engine nodes on this host (waited %.1f ms)\n",
               (unsigned long long)v, (double)(wsync_now_ns() - t0) / 1e6);
    else if (st == WSYNC_ERR_TIMEOUT || st == WSYNC_ERR_PEER)
        printf("trainer: version %llu not held (%s, waited %.1f ms): %s\n", (unsigned long long)v,
               wsync_status_str(st), (double)(wsync_now_ns() - t0) / 1e6, wsync_last_error());
    else
        return st;
    fflush(stdout);
    for (k = 0; k < n; k++)
        WSYNC_CHECK(fill_extent(model, mem, v + 1, (void *)owned[k].ptr, owned[k].offset, owned[k].len, stage));
    return WSYNC_OK;
}

const struct option cli_trainer_options[] = {{"control", 1, 0, 'c'},
                                             {"rank", 1, 0, 'r'},
                                             {"world", 1, 0, 'w'},
                                             {"synthetic", 1, 0, 's'},
                                             {"safetensors", 1, 0, 'f'},
                                             {"versions", 1, 0, 'n'},
                                             {"interval-ms", 1, 0, 'i'},
                                             {"wait-engines", 1, 0, 'e'},
                                             {"serve", 1, 0, 'S'},
                                             {"listen", 1, 0, 'l'},
                                             {"advertise", 1, 0, 'a'},
                                             {"device", 1, 0, 'd'},
                                             {"chunk", 1, 0, 'k'},
                                             {"layout", 1, 0, 'L'},
                                             {"zero-copy", 0, 0, 'z'},
                                             {"single-copy", 0, 0, 'C'},
                                             {"hold-timeout-ms", 1, 0, 'T'},
                                             {"host-id", 1, 0, 'H'},
                                             {"exit-after-publish", 0, 0, 'x'},
                                             {"token-file", 1, 0, 'K'},
                                             {"help", 0, 0, 'h'},
                                             {0, 0, 0, 0}};

/* What the command line asks for, and what a run holds (freed by
 * trainer_free). */
typedef struct trainer {
    const char *control, *synthetic, *files, *serve;
    wsync_publisher_config_t pc;
    uint64_t chunk;
    long versions, interval, engines, hold_ms;
    int exit_after, single;
    cli_model_t model;
    json_t *mj;
    char *mtext;          /* the manifest the publisher gets */
    wsync_owned_t *owned; /* [n] this rank's extents, in memory of `mem` */
    int n;
    const wsync_mem_ops_t *mem;
    void *stage; /* host staging for file content into GPU memory */
    wsync_publisher_t *pub;
    wsync_control_t *ctl;
    uint64_t base; /* the newest version published before this run */
} trainer_t;

/* One option into t; 0 to go on, -1 to exit 0 (--help), else the exit code. */
static int trainer_option(trainer_t *t, int o)
{
    static char token[512];
    switch (o) {
    case 'c': t->control = optarg; break;
    case 'r': return cli_parse_int("trainer", "--rank", optarg, 0, TRAINER_MAX_WORLD - 1, &t->pc.rank) ? 2 : 0;
    case 'w': return cli_parse_int("trainer", "--world", optarg, 1, TRAINER_MAX_WORLD, &t->pc.world) ? 2 : 0;
    /* The later of --synthetic / --safetensors wins (a flag over a file's). */
    case 's':
        t->synthetic = optarg;
        t->files = NULL;
        break;
    case 'f':
        t->files = optarg;
        t->synthetic = NULL;
        break;
    case 'n': return cli_parse_long("trainer", "--versions", optarg, 0, INT_MAX, &t->versions) ? 2 : 0;
    case 'i':
        return cli_parse_long("trainer", "--interval-ms", optarg, 0, TRAINER_MAX_INTERVAL_MS, &t->interval) ? 2 : 0;
    case 'e': return cli_parse_long("trainer", "--wait-engines", optarg, 0, INT_MAX, &t->engines) ? 2 : 0;
    case 'S': t->serve = optarg; break;
    case 'K':
        if (wsync_auth_read_token_file(optarg, token, sizeof(token)) != WSYNC_OK) {
            fprintf(stderr, "wsync trainer: %s\n", wsync_last_error());
            return 2;
        }
        t->pc.token = token;
        break;
    case 'l': t->pc.listen = optarg; break;
    case 'a': t->pc.advertise_host = optarg; break;
    case 'd': t->pc.device = optarg; break;
    case 'k': return cli_parse_size("trainer", "--chunk", optarg, CLI_MIN_CHUNK, CLI_MAX_CHUNK, &t->chunk) ? 2 : 0;
    case 'L':
        if (strcmp(optarg, "even") == 0)
            t->pc.layout = WSYNC_LAYOUT_EVEN;
        else if (strcmp(optarg, "fsdp") == 0)
            t->pc.layout = WSYNC_LAYOUT_FSDP;
        else {
            fprintf(stderr, "wsync trainer: --layout must be even or fsdp\n");
            return 2;
        }
        break;
    case 'z': t->pc.zero_copy = 1; break;
    case 'C': t->single = 1; break;
    case 'T':
        return cli_parse_long("trainer", "--hold-timeout-ms", optarg, 0, TRAINER_MAX_INTERVAL_MS, &t->hold_ms) ? 2
                                                                                                               : 0;
    case 'H': t->pc.host_id = optarg; break;
    case 'x': t->exit_after = 1; break;
    case 'h': usage(stdout); return -1; /* exit 0 */
    default: usage(stderr); return 2;
    }
    return 0;
}

/* The options (after the config file's); 0 to go on, else 1 with the exit
 * code in *rc (0 after --help). */
static int trainer_parse(trainer_t *t, int argc, char **argv, int *rc)
{
    int o;
    if ((*rc = cli_config_apply("trainer", &argc, &argv)) != 0)
        return 1;
    optind = 1;
    while ((o = getopt_long(argc, argv, "", cli_trainer_options, NULL)) != -1)
        if ((*rc = trainer_option(t, o)) != 0) {
            *rc = *rc < 0 ? 0 : *rc;
            return 1;
        }
    if ((t->control == NULL && t->serve == NULL) || t->pc.world < 1 || t->pc.rank < 0 ||
        t->pc.rank >= t->pc.world || (t->synthetic == NULL && t->files == NULL)) {
        fprintf(stderr, "wsync trainer: need --control URL (or --serve), --rank R < --world W, and one of "
                        "--synthetic / --safetensors\n");
        usage(stderr);
        *rc = 2;
        return 1;
    }
    return 0;
}

/* The model, this rank's extents allocated where --device says, as a real
 * trainer's shards are (GPU memory for cuda:N, so publish snapshots them
 * device to device), and a host staging buffer when files fill GPU memory.
 * 0, or the exit code. */
static int trainer_share(trainer_t *t)
{
    uint64_t maxlen = 0;
    wsync_status_t st;
    int i, dev = 0;
    if (cli_model_open(t->synthetic, t->files, &t->model) != WSYNC_OK) {
        fprintf(stderr, "wsync trainer: %s\n", wsync_last_error());
        return 2;
    }
    if (wsync_manifest_to_json(t->model.manifest, &t->mj) != WSYNC_OK ||
        (t->mtext = json_dumps(t->mj, JSON_COMPACT)) == NULL)
        return 1;
    /* Only this rank's extents are held: a stand-in for a sharded trainer. */
    t->owned = calloc(1 << 16, sizeof(*t->owned));
    st = t->owned ? wsync_publisher_owned_extents(t->mtext, t->pc.layout, t->pc.world, t->pc.rank, t->owned,
                                                  1 << 16, &t->n)
                  : WSYNC_ERR_NOMEM;
    if (st != WSYNC_OK || t->n > (1 << 16)) {
        cli_report("trainer", "layout", st ? st : WSYNC_ERR_INVALID);
        t->n = 0;
        return 1;
    }
    if ((st = wsync_mem_get(t->pc.device, &t->mem, &dev)) != WSYNC_OK || (st = t->mem->init(dev)) != WSYNC_OK) {
        cli_report("trainer", "--device", st);
        t->mem = NULL;
        return 2;
    }
    for (i = 0; i < t->n; i++) {
        void *ptr = NULL;
        if ((st = t->mem->alloc(t->owned[i].len ? t->owned[i].len : 1, &ptr)) != WSYNC_OK) {
            cli_report("trainer", "cannot allocate this rank's extents", st);
            return 1;
        }
        t->owned[i].ptr = ptr;
        if (t->owned[i].len > maxlen)
            maxlen = t->owned[i].len;
    }
    if (t->mem->kind != WSYNC_MEM_HOST && t->model.nfiles > 0 && (t->stage = malloc(maxlen ? maxlen : 1)) == NULL) {
        fprintf(stderr, "wsync trainer: out of memory for a %llu-byte staging buffer\n", (unsigned long long)maxlen);
        return 1;
    }
    return 0;
}

/* The publisher over this rank's extents, and a control client to find
 * the newest version and watch engines. 0, or the exit code. */
static int trainer_start(trainer_t *t)
{
    char sz[32], isz[32];
    wsync_status_t st;
    t->pc.control_url = t->control;
    t->pc.serve = t->serve;
    t->pc.manifest_json = t->mtext;
    t->pc.chunk_size = t->chunk;
    t->pc.owned = t->owned;
    t->pc.nowned = t->n;
    if ((st = wsync_publisher_create(&t->pc, &t->pub)) != WSYNC_OK) {
        cli_report("trainer", "cannot start", st);
        return 1;
    }
    if (t->serve)
        printf("control endpoint: %s\n", wsync_publisher_control_url(t->pub));
    if ((st = wsync_control_open(wsync_publisher_control_url(t->pub), t->pc.token, &t->ctl)) != WSYNC_OK ||
        (st = wsync_control_latest_version(t->ctl, &t->base)) != WSYNC_OK) {
        cli_report("trainer", "control endpoint", st);
        return 1;
    }
    printf("trainer rank %d/%d: owns %s in %d extents; model image %s, %zu tensors\n", t->pc.rank, t->pc.world,
           wsync_fmt_size(wsync_publisher_owned_bytes(t->pub), sz, sizeof(sz)), t->n,
           wsync_fmt_size(t->model.manifest->image_size, isz, sizeof(isz)), t->model.manifest->ntensors);
    fflush(stdout);
    return 0;
}

/* Version v: written (unless `filled`: single copy wrote it after the last
 * hold), published and waited for until every rank reported it; then, with
 * single copy, held by this host's engines and the next one written.
 * 0 on, 1 stop (interrupted), -1 failed (reported). */
static int trainer_version(trainer_t *t, uint64_t v, int filled)
{
    wsync_status_t st = WSYNC_OK;
    uint64_t t0 = 0;
    double ms;
    int k;
    for (k = 0; k < t->n && !filled; k++)
        if ((st = fill_extent(&t->model, t->mem, v, (void *)t->owned[k].ptr, t->owned[k].offset, t->owned[k].len,
                              t->stage)) != WSYNC_OK)
            break;
    /* Timed: the publish alone (digest, report, snapshot copy), not the
     * wait for engines, the interval or the stand-in's fill before it. */
    if (st == WSYNC_OK) {
        wsync_publish_opts_t po = {.flags = t->single ? WSYNC_PUBLISH_SINGLE_COPY : 0};
        t0 = wsync_now_ns();
        st = wsync_publisher_publish_opts(t->pub, v, &po);
    }
    if (st != WSYNC_OK) {
        cli_report("trainer", "publish failed", st);
        return -1;
    }
    /* "reported" until every rank reported it: only then is it published. */
    ms = (double)(wsync_now_ns() - t0) / 1e6;
    printf("trainer rank %d: reported version %llu (%.1f ms)\n", t->pc.rank, (unsigned long long)v, ms);
    fflush(stdout);
    /* Ranks step together, as a trainer's ranks do after each optimizer
     * step: the next version waits until every rank reported this one. */
    if ((k = wait_published(t->pub, v)) < 0) {
        cli_report("trainer", "waiting for the other ranks", WSYNC_ERR_HTTP);
        return -1;
    }
    if (k > 0)
        return 1;
    printf("trainer rank %d: published version %llu (%.1f ms), every rank reported it\n", t->pc.rank,
           (unsigned long long)v, ms);
    fflush(stdout);
    if (t->single && hold_then_write(t->pub, &t->model, t->mem, v, t->owned, t->n, t->stage, t->hold_ms) != WSYNC_OK)
        return -1;
    return 0;
}

/* The versions in turn, each after the engines asked for hold the last and
 * the interval; 0, or 1 when one failed. */
static int trainer_run(trainer_t *t)
{
    long i;
    int r = 0;
    for (i = 0; i < t->versions && !stop_flag; i++) {
        uint64_t v = t->base + (uint64_t)i + 1;
        if (i > 0 && t->engines > 0 && wait_engines(t->ctl, (int)t->engines, v - 1))
            break;
        if (i > 0 && t->interval > 0 && wsync_sleep_cancellable(t->interval, NULL))
            break; /* interrupted during the pause */
        if ((r = trainer_version(t, v, i > 0 && t->single)) != 0)
            break;
    }
    if (r < 0)
        return 1;
    if (t->engines > 0 && !stop_flag && t->versions > 0)
        wait_engines(t->ctl, (int)t->engines, t->base + (uint64_t)t->versions);
    while (!stop_flag && !t->exit_after)
        usleep(50000);
    return 0;
}

static void trainer_free(trainer_t *t)
{
    int i;
    wsync_publisher_destroy(t->pub);
    wsync_control_close(t->ctl);
    for (i = 0; t->owned && t->mem && i < t->n; i++)
        if (t->owned[i].ptr)
            t->mem->free((void *)t->owned[i].ptr);
    free(t->owned);
    free(t->stage);
    free(t->mtext);
    json_decref(t->mj);
    cli_model_close(&t->model);
}

int cmd_trainer(int argc, char **argv)
{
    trainer_t t = {.pc = {.rank = -1, .world = 0}, .versions = 3, .hold_ms = 10000};
    int rc = 0;
    if (trainer_parse(&t, argc, argv, &rc))
        return rc;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);
    if ((rc = trainer_share(&t)) == 0 && (rc = trainer_start(&t)) == 0)
        rc = trainer_run(&t);
    trainer_free(&t);
    return rc;
}
