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

int cmd_trainer(int argc, char **argv)
{
    const struct option *opts = cli_trainer_options;
    static char token[512];
    const char *control = NULL, *synthetic = NULL, *files = NULL, *serve = NULL;
    wsync_publisher_config_t pc = {.rank = -1, .world = 0};
    cli_model_t model = {0};
    wsync_publisher_t *pub = NULL;
    wsync_control_t *ctl = NULL;
    wsync_owned_t *owned = NULL;
    const wsync_mem_ops_t *mem = NULL;
    void *stage = NULL;
    json_t *mj = NULL;
    char *mtext = NULL;
    uint64_t base = 0, chunk = 0, maxlen = 0;
    long versions = 3, interval = 0, engines = 0, hold_ms = 10000;
    int o, n = 0, i, rc = 1, exit_after = 0, dev = 0, single = 0, filled = 0;
    wsync_status_t st;

    if ((o = cli_config_apply("trainer", &argc, &argv)) != 0)
        return o;
    optind = 1;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'c': control = optarg; break;
        case 'r':
            if (cli_parse_int("trainer", "--rank", optarg, 0, TRAINER_MAX_WORLD - 1, &pc.rank))
                return 2;
            break;
        case 'w':
            if (cli_parse_int("trainer", "--world", optarg, 1, TRAINER_MAX_WORLD, &pc.world))
                return 2;
            break;
        /* The later of --synthetic / --safetensors wins (a flag over a file's). */
        case 's':
            synthetic = optarg;
            files = NULL;
            break;
        case 'f':
            files = optarg;
            synthetic = NULL;
            break;
        case 'n':
            if (cli_parse_long("trainer", "--versions", optarg, 0, INT_MAX, &versions))
                return 2;
            break;
        case 'i':
            if (cli_parse_long("trainer", "--interval-ms", optarg, 0, TRAINER_MAX_INTERVAL_MS, &interval))
                return 2;
            break;
        case 'e':
            if (cli_parse_long("trainer", "--wait-engines", optarg, 0, INT_MAX, &engines))
                return 2;
            break;
        case 'S': serve = optarg; break;
        case 'K':
            if (wsync_auth_read_token_file(optarg, token, sizeof(token)) != WSYNC_OK) {
                fprintf(stderr, "wsync trainer: %s\n", wsync_last_error());
                return 2;
            }
            pc.token = token;
            break;
        case 'l': pc.listen = optarg; break;
        case 'a': pc.advertise_host = optarg; break;
        case 'd': pc.device = optarg; break;
        case 'k':
            if (cli_parse_size("trainer", "--chunk", optarg, CLI_MIN_CHUNK, CLI_MAX_CHUNK, &chunk))
                return 2;
            break;
        case 'L':
            if (strcmp(optarg, "even") == 0)
                pc.layout = WSYNC_LAYOUT_EVEN;
            else if (strcmp(optarg, "fsdp") == 0)
                pc.layout = WSYNC_LAYOUT_FSDP;
            else {
                fprintf(stderr, "wsync trainer: --layout must be even or fsdp\n");
                return 2;
            }
            break;
        case 'z': pc.zero_copy = 1; break;
        case 'C': single = 1; break;
        case 'T':
            if (cli_parse_long("trainer", "--hold-timeout-ms", optarg, 0, TRAINER_MAX_INTERVAL_MS, &hold_ms))
                return 2;
            break;
        case 'H': pc.host_id = optarg; break;
        case 'x': exit_after = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if ((control == NULL && serve == NULL) || pc.world < 1 || pc.rank < 0 || pc.rank >= pc.world ||
        (synthetic == NULL && files == NULL)) {
        fprintf(stderr, "wsync trainer: need --control URL (or --serve), --rank R < --world W, and one of "
                        "--synthetic / --safetensors\n");
        usage(stderr);
        return 2;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);
    if (cli_model_open(synthetic, files, &model) != WSYNC_OK) {
        fprintf(stderr, "wsync trainer: %s\n", wsync_last_error());
        return 2;
    }
    if (wsync_manifest_to_json(model.manifest, &mj) != WSYNC_OK || (mtext = json_dumps(mj, JSON_COMPACT)) == NULL)
        goto out;
    /* Only this rank's extents are held: a stand-in for a sharded trainer. */
    owned = calloc(1 << 16, sizeof(*owned));
    st = wsync_publisher_owned_extents(mtext, pc.layout, pc.world, pc.rank, owned, 1 << 16, &n);
    if (st != WSYNC_OK || n > (1 << 16)) {
        cli_report("trainer", "layout", st ? st : WSYNC_ERR_INVALID);
        goto out;
    }
    /* The extents live where --device says, as a real trainer's shards do
     * (GPU memory for cuda:N), so publish snapshots them device to device. */
    if ((st = wsync_mem_get(pc.device, &mem, &dev)) != WSYNC_OK || (st = mem->init(dev)) != WSYNC_OK) {
        cli_report("trainer", "--device", st);
        mem = NULL;
        rc = 2;
        goto out;
    }
    for (i = 0; i < n; i++) {
        void *ptr = NULL;
        if ((st = mem->alloc(owned[i].len ? owned[i].len : 1, &ptr)) != WSYNC_OK) {
            cli_report("trainer", "cannot allocate this rank's extents", st);
            goto out;
        }
        owned[i].ptr = ptr;
        if (owned[i].len > maxlen)
            maxlen = owned[i].len;
    }
    if (mem->kind != WSYNC_MEM_HOST && model.nfiles > 0 && (stage = malloc(maxlen ? maxlen : 1)) == NULL) {
        fprintf(stderr, "wsync trainer: out of memory for a %llu-byte staging buffer\n", (unsigned long long)maxlen);
        goto out;
    }
    pc.control_url = control;
    pc.serve = serve;
    pc.manifest_json = mtext;
    pc.chunk_size = chunk;
    pc.owned = owned;
    pc.nowned = n;
    if ((st = wsync_publisher_create(&pc, &pub)) != WSYNC_OK) {
        cli_report("trainer", "cannot start", st);
        goto out;
    }
    if (serve)
        printf("control endpoint: %s\n", wsync_publisher_control_url(pub));
    if ((st = wsync_control_open(wsync_publisher_control_url(pub), pc.token, &ctl)) != WSYNC_OK ||
        (st = wsync_control_latest_version(ctl, &base)) != WSYNC_OK) {
        cli_report("trainer", "control endpoint", st);
        goto out;
    }
    {
        char sz[32];
        printf("trainer rank %d/%d: owns %s in %d extents; model image %s, %zu tensors\n", pc.rank, pc.world,
               wsync_fmt_size(wsync_publisher_owned_bytes(pub), sz, sizeof(sz)), n,
               wsync_fmt_size(model.manifest->image_size, (char[32]){0}, 32), model.manifest->ntensors);
        fflush(stdout);
    }
    for (i = 0; i < versions && !stop_flag; i++) {
        uint64_t v = base + (uint64_t)i + 1, t0 = 0;
        double ms;
        int k;
        if (i > 0 && engines > 0 && wait_engines(ctl, (int)engines, v - 1))
            break;
        if (i > 0 && interval > 0 && wsync_sleep_cancellable(interval, NULL))
            break; /* interrupted during the pause */
        for (k = 0; k < n && !filled; k++)
            if ((st = fill_extent(&model, mem, v, (void *)owned[k].ptr, owned[k].offset, owned[k].len, stage)) !=
                WSYNC_OK)
                break;
        filled = 0;
        /* Timed: the publish alone (digest, report, snapshot copy), not the
         * wait for engines, the interval or the stand-in's fill before it. */
        if (st == WSYNC_OK) {
            wsync_publish_opts_t po = {.flags = single ? WSYNC_PUBLISH_SINGLE_COPY : 0};
            t0 = wsync_now_ns();
            st = wsync_publisher_publish_opts(pub, v, &po);
        }
        if (st != WSYNC_OK) {
            cli_report("trainer", "publish failed", st);
            goto out;
        }
        /* "reported" until every rank reported it: only then is it published. */
        ms = (double)(wsync_now_ns() - t0) / 1e6;
        printf("trainer rank %d: reported version %llu (%.1f ms)\n", pc.rank, (unsigned long long)v, ms);
        fflush(stdout);
        /* Ranks step together, as a trainer's ranks do after each optimizer
         * step: the next version waits until every rank reported this one. */
        if ((k = wait_published(pub, v)) < 0) {
            cli_report("trainer", "waiting for the other ranks", WSYNC_ERR_HTTP);
            goto out;
        }
        if (k > 0)
            break;
        printf("trainer rank %d: published version %llu (%.1f ms), every rank reported it\n", pc.rank,
               (unsigned long long)v, ms);
        fflush(stdout);
        if (single && (st = hold_then_write(pub, &model, mem, v, owned, n, stage, hold_ms)) != WSYNC_OK)
            goto out;
        filled = single;
    }
    if (engines > 0 && !stop_flag && versions > 0)
        wait_engines(ctl, (int)engines, base + (uint64_t)versions);
    while (!stop_flag && !exit_after)
        usleep(50000);
    rc = 0;
out:
    wsync_publisher_destroy(pub);
    wsync_control_close(ctl);
    for (i = 0; owned && mem && i < n; i++)
        if (owned[i].ptr)
            mem->free((void *)owned[i].ptr);
    free(owned);
    free(stage);
    free(mtext);
    json_decref(mj);
    cli_model_close(&model);
    return rc;
}
