/* demo.c: `wsync demo`: wsync's whole job on one machine. Runs the control
 * endpoint in this process, starts W trainer processes and M engine nodes of
 * L processes each, publishes N versions (each once every engine holds the
 * previous one), and succeeds only when every engine verified every version. */
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/demo_procs.h"
#include "cli/model.h"
#include "common/mem/mem.h"
#include "common/base/settings.h"
#include "common/base/util.h"
#include "common/control/control_server.h"

/* A synthetic model: the smallest one wsync_manifest_synthetic builds, and
 * far more than one machine holds several copies of. */
#define DEMO_MIN_MODEL (1ULL << 20)
#define DEMO_MAX_MODEL (1ULL << 40)

static volatile sig_atomic_t interrupted; /* the signal that came, or 0 */

static void on_signal(int sig)
{
    interrupted = sig;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: wsync demo [--trainers W] [--engines M] [--local-ranks L]\n"
            "                  [--synthetic SIZE | --safetensors F1,F2,...] [--versions N] [--dump DIR]\n"
            "                  [--mode staged|in-place] [--transport auto|tcp|nccl|verbs|local] [--chunk SIZE]\n"
            "                  [--layout even|fsdp] [--timeout-s S] [--device host|cuda] [--host-id PREFIX]\n"
            "                  [--tp T [--rules FILE]] [--plan auto|direct|relay:F] [--config FILE]\n"
            "                  [--max-failures K] [--set SETTING=VALUE]...\n"
            "Defaults: 2 trainers, 2 engine nodes x 2 local ranks, a 1 GiB synthetic LLM, 3 versions.\n"
            "  --device cuda      trainer rank i on GPU i %% G, engine local rank j on GPU j %% G (G GPUs here)\n"
            "  --host-id PREFIX   trainers claim host PREFIX-trainers and engine node k host PREFIX-e<k>,\n"
            "                     as if each ran on its own machine\n"
            "  --tp T             each node's L local ranks form L/T tensor-parallel groups of T (engine\n"
            "                     layouts, docs/ENGINE_LAYOUTS.md); L must be a multiple of T\n"
            "  --plan P           the engines' plan setting (relay:F: nodes relay to each other)\n"
            "  --max-failures K   an engine rank gives up after K failed pulls in a row (default 5;\n"
            "                     1 shows a failure at once)\n"
            "  --config FILE      read settings and these options from FILE's \"demo\" object (docs/CONFIG.md;\n"
            "                     flags given here override the file); its settings and --set's reach the\n"
            "                     trainers and engines too\n");
}

static const char *plural(long n)
{
    return n == 1 ? "" : "s";
}

/* The model the trainers will open, checked once here (a truncated file,
 * files whose tensors differ): the demo stops before starting anyone. */
static int check_model(const char *synthetic, const char *files)
{
    cli_model_t m;
    if (cli_model_open(synthetic, files, &m) != WSYNC_OK) {
        fprintf(stderr, "wsync demo: %s: %s\n", files ? "--safetensors" : "--synthetic", wsync_last_error());
        return 2;
    }
    cli_model_close(&m);
    return 0;
}

const struct option cli_demo_options[] =
    {{"trainers", 1, 0, 'W'},    {"engines", 1, 0, 'M'},      {"local-ranks", 1, 0, 'L'}, {"synthetic", 1, 0, 's'},
     {"safetensors", 1, 0, 'f'}, {"versions", 1, 0, 'n'},     {"dump", 1, 0, 'D'},        {"mode", 1, 0, 'm'},
     {"transport", 1, 0, 't'},   {"chunk", 1, 0, 'k'},        {"layout", 1, 0, 'y'},      {"timeout-s", 1, 0, 'T'},
     {"device", 1, 0, 'd'},      {"host-id", 1, 0, 'H'},      {"tp", 1, 0, 'P'},          {"rules", 1, 0, 'R'},
     {"plan", 1, 0, 'p'},        {"max-failures", 1, 0, 'x'}, {"help", 0, 0, 'h'},        {0, 0, 0, 0}};

/* The trainers and engines are processes of their own: the settings a file
 * or --set gave this one reach them through their environment variables
 * (below a flag, above a file, so they resolve to the same values). */
static void export_settings(void)
{
    int i;
    for (i = 0; i < WSYNC_SET_COUNT; i++) {
        wsync_setting_source_t src = wsync_setting_source((wsync_setting_id_t)i);
        if (src == WSYNC_SRC_FILE || src == WSYNC_SRC_FLAG)
            setenv(wsync_setting_def((wsync_setting_id_t)i)->env, wsync_setting_text((wsync_setting_id_t)i), 1);
    }
}

/* What the demo runs; the sizes were checked here, the processes get the
 * text. */
typedef struct demo_opts {
    const char *device, *host_id, *tp, *rules, *synthetic, *files, *dumpdir, *mode, *transport, *chunk, *layout;
    const char *max_failures; /* passed to the engines as given (checked here) */
    long W, M, L, N, T, timeout_s;
    int ngpus;
} demo_opts_t;

#define DEMO_GO (-1) /* parse_opts/check_opts: carry on (else the exit status) */

static int parse_opts(int argc, char **argv, demo_opts_t *d)
{
    uint64_t checked = 0;
    long checked_long = 0;
    int o, bad = 0;
    optind = 1;
    while (bad == 0 && (o = getopt_long(argc, argv, "", cli_demo_options, NULL)) != -1) {
        switch (o) {
        case 'W': bad = cli_parse_long("demo", "--trainers", optarg, 1, DEMO_MAX_PROCS, &d->W); break;
        case 'M': bad = cli_parse_long("demo", "--engines", optarg, 1, DEMO_MAX_PROCS, &d->M); break;
        case 'L': bad = cli_parse_long("demo", "--local-ranks", optarg, 1, DEMO_MAX_PROCS, &d->L); break;
        /* The later of --synthetic / --safetensors wins (a flag over a file's). */
        case 's':
            d->synthetic = optarg;
            d->files = NULL;
            bad = cli_parse_size("demo", "--synthetic", optarg, DEMO_MIN_MODEL, DEMO_MAX_MODEL, &checked);
            break;
        case 'f':
            d->files = optarg;
            d->synthetic = NULL;
            break;
        case 'n': bad = cli_parse_long("demo", "--versions", optarg, 1, INT_MAX, &d->N); break;
        case 'D': d->dumpdir = optarg; break;
        case 'm': d->mode = optarg; break;
        case 't': d->transport = optarg; break;
        case 'k':
            d->chunk = optarg;
            bad = cli_parse_size("demo", "--chunk", optarg, CLI_MIN_CHUNK, CLI_MAX_CHUNK, &checked);
            break;
        case 'y': d->layout = optarg; break;
        case 'T': bad = cli_parse_long("demo", "--timeout-s", optarg, 1, INT_MAX, &d->timeout_s); break;
        case 'd': d->device = optarg; break;
        case 'H': d->host_id = optarg; break;
        case 'P':
            d->tp = optarg;
            bad = cli_parse_long("demo", "--tp", optarg, 1, DEMO_MAX_PROCS, &d->T);
            break;
        case 'R': d->rules = optarg; break;
        case 'p': bad = cli_set_plan("demo", optarg); break;
        case 'x':
            d->max_failures = optarg;
            bad = cli_parse_long("demo", "--max-failures", optarg, 1, INT_MAX, &checked_long);
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (bad)
        return bad;
    if (optind != argc) {
        fprintf(stderr, "wsync demo: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (d->synthetic == NULL && d->files == NULL)
        d->synthetic = "1G";
    return DEMO_GO;
}

/* Everything that can be refused before a process starts. */
static int check_opts(demo_opts_t *d)
{
    if (d->W + d->M * d->L > DEMO_MAX_PROCS) {
        fprintf(stderr, "wsync demo: --trainers %ld + --engines %ld x --local-ranks %ld is more than %d processes\n",
                d->W, d->M, d->L, DEMO_MAX_PROCS);
        return 2;
    }
    if ((d->tp && d->L % d->T != 0) || (d->rules && d->tp == NULL)) {
        fprintf(stderr,
                "wsync demo: --tp T needs T >= 1 dividing --local-ranks (%ld), and --rules goes with --tp\n", d->L);
        return 2;
    }
    if (strcmp(d->device, "cuda") == 0) {
        /* Counted here, before any rank starts: ranks go round-robin. */
        d->ngpus = wsync_cuda_device_count();
        if (d->ngpus == 0) {
            fprintf(stderr, "wsync demo: --device cuda: no CUDA device here (or wsync was built without CUDA); "
                            "use --device host\n");
            return 1;
        }
    } else if (strcmp(d->device, "host") != 0) {
        fprintf(stderr, "wsync demo: --device must be host or cuda (ranks are placed on GPUs round-robin)\n");
        return 2;
    }
    if (strcmp(d->transport, "nccl") == 0 && wsync_cuda_device_count() == 0) {
        fprintf(stderr, "wsync demo: --transport nccl needs a CUDA device, and there is none here (or wsync was "
                        "built without CUDA); use --transport tcp\n");
        return 1;
    }
    return check_model(d->synthetic, d->files);
}

/* Engine nodes find their board by (host id, engine id): unless one was
 * given, this demo's processes get a host id of their own, so two demos (or
 * a demo and a test) on one machine never share a board. */
static void own_host_id(const demo_opts_t *d)
{
    char hn[64], hid[128];
    if (d->host_id || wsync_setting_str(WSYNC_SET_HOST_ID)[0] != '\0')
        return;
    if (gethostname(hn, sizeof(hn)) != 0)
        snprintf(hn, sizeof(hn), "localhost");
    hn[sizeof(hn) - 1] = '\0';
    snprintf(hid, sizeof(hid), "%s.demo%d", hn, (int)getpid());
    setenv("WSYNC_HOST_ID", hid, 1);
}

/* Engine rank i: node i / L, local rank i % L. */
static void spawn_engine(const demo_opts_t *d, const char *url, long i, proc_t *p)
{
    char *args[40], ebuf[48], rbuf[24], lbuf[24], nbuf[24], dbuf[32], hbuf[160];
    int a = 0;
    snprintf(ebuf, sizeof(ebuf), "e%ld", i / d->L);
    snprintf(rbuf, sizeof(rbuf), "%ld", i % d->L);
    snprintf(lbuf, sizeof(lbuf), "%ld", d->L);
    snprintf(nbuf, sizeof(nbuf), "%ld", d->N);
    args[a++] = "wsync";
    args[a++] = "engine";
    args[a++] = "--control";
    args[a++] = (char *)url;
    args[a++] = "--engine";
    args[a++] = ebuf;
    args[a++] = "--local-rank";
    args[a++] = rbuf;
    args[a++] = "--local-world";
    args[a++] = lbuf;
    args[a++] = "--versions";
    args[a++] = nbuf;
    args[a++] = "--mode";
    args[a++] = (char *)d->mode;
    args[a++] = "--transport";
    args[a++] = (char *)d->transport;
    args[a++] = "--timeout-ms";
    args[a++] = "300000";
    if (d->dumpdir) {
        args[a++] = "--dump";
        args[a++] = (char *)d->dumpdir;
    }
    if (d->tp) {
        args[a++] = "--tp";
        args[a++] = (char *)d->tp;
    }
    if (d->rules) {
        args[a++] = "--rules";
        args[a++] = (char *)d->rules;
    }
    if (d->max_failures) {
        args[a++] = "--max-failures";
        args[a++] = (char *)d->max_failures;
    }
    if (d->ngpus > 0) {
        snprintf(dbuf, sizeof(dbuf), "cuda:%ld", (i % d->L) % d->ngpus);
        args[a++] = "--device";
        args[a++] = dbuf;
    }
    if (d->host_id) {
        snprintf(hbuf, sizeof(hbuf), "%s-%s", d->host_id, ebuf);
        args[a++] = "--host-id";
        args[a++] = hbuf;
    }
    args[a] = NULL;
    p->engine = 1;
    snprintf(p->name, sizeof(p->name), "engine %s rank %s", ebuf, rbuf);
    demo_spawn(args, p);
}

static void spawn_trainer(const demo_opts_t *d, const char *url, long i, proc_t *p)
{
    char *args[32], rbuf[24], wbuf[24], nbuf[24], mbuf[24], dbuf[32], hbuf[160];
    int a = 0;
    snprintf(rbuf, sizeof(rbuf), "%ld", i);
    snprintf(wbuf, sizeof(wbuf), "%ld", d->W);
    snprintf(nbuf, sizeof(nbuf), "%ld", d->N);
    snprintf(mbuf, sizeof(mbuf), "%ld", d->M);
    args[a++] = "wsync";
    args[a++] = "trainer";
    args[a++] = "--control";
    args[a++] = (char *)url;
    args[a++] = "--rank";
    args[a++] = rbuf;
    args[a++] = "--world";
    args[a++] = wbuf;
    args[a++] = d->synthetic ? "--synthetic" : "--safetensors";
    args[a++] = (char *)(d->synthetic ? d->synthetic : d->files);
    args[a++] = "--versions";
    args[a++] = nbuf;
    args[a++] = "--wait-engines";
    args[a++] = mbuf;
    args[a++] = "--chunk";
    args[a++] = (char *)d->chunk;
    args[a++] = "--layout";
    args[a++] = (char *)d->layout;
    if (d->ngpus > 0) {
        snprintf(dbuf, sizeof(dbuf), "cuda:%ld", i % d->ngpus);
        args[a++] = "--device";
        args[a++] = dbuf;
    }
    if (d->host_id) {
        snprintf(hbuf, sizeof(hbuf), "%s-trainers", d->host_id);
        args[a++] = "--host-id";
        args[a++] = hbuf;
    }
    args[a] = NULL;
    p->engine = 0;
    snprintf(p->name, sizeof(p->name), "trainer rank %ld", i);
    demo_spawn(args, p);
}

static void print_intro(const demo_opts_t *d, const char *url)
{
    printf("wsync demo: control endpoint %s  (watch it: wsync status --control %s --watch)\n", url, url);
    printf("wsync demo: %ld trainer rank%s -> %ld engine node%s x %ld local rank%s, model %s, %ld version%s, "
           "%s mode, transport %s, device %s",
           d->W, plural(d->W), d->M, plural(d->M), d->L, plural(d->L), d->synthetic ? d->synthetic : d->files,
           d->N, plural(d->N), d->mode, d->transport, d->device);
    if (d->tp)
        printf(", %ld TP group%s of %ld per node", d->L / d->T, plural(d->L / d->T), d->T);
    if (d->ngpus > 0)
        printf(" (%d GPUs, ranks round-robin)", d->ngpus);
    printf("\n");
    fflush(stdout);
}

int cmd_demo(int argc, char **argv)
{
    demo_opts_t d = {.device = "host",
                     .mode = "staged",
                     .transport = "tcp",
                     .chunk = "64M",
                     .layout = "even",
                     .W = 2,
                     .M = 2,
                     .L = 2,
                     .N = 3,
                     .timeout_s = 600};
    wsync_control_server_t *server = NULL;
    wsync_control_server_config_t sc = {.listen = "127.0.0.1:0"};
    proc_t *procs = NULL;
    int nprocs = 0, o, failed;
    long i;
    uint64_t t0;
    char url[256];

    if ((o = cli_config_apply("demo", &argc, &argv)) != 0)
        return o;
    if ((o = parse_opts(argc, argv, &d)) != DEMO_GO || (o = check_opts(&d)) != 0)
        return o;
    own_host_id(&d);
    export_settings();
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);
    if (wsync_control_server_start(&sc, &server) != WSYNC_OK) {
        cli_report("demo", "cannot start the control endpoint", WSYNC_ERR_IO);
        return 1;
    }
    snprintf(url, sizeof(url), "%s", wsync_control_server_url(server));
    print_intro(&d, url);
    procs = calloc(DEMO_MAX_PROCS, sizeof(*procs));
    if (procs == NULL) {
        fprintf(stderr, "wsync demo: out of memory\n");
        wsync_control_server_stop(server);
        return 1;
    }
    t0 = wsync_now_ns();
    for (i = 0; i < d.M * d.L; i++)
        spawn_engine(&d, url, i, &procs[nprocs++]);
    for (i = 0; i < d.W; i++)
        spawn_trainer(&d, url, i, &procs[nprocs++]);
    /* Engines end on their own after N versions; a trainer that ends early
     * failed, and so does the demo at once. */
    failed = demo_watch(procs, nprocs, (int)(d.M * d.L), t0 + (uint64_t)d.timeout_s * 1000000000ULL, &interrupted);
    demo_stop(procs, nprocs, interrupted ? interrupted : SIGTERM);
    if (!failed)
        printf("wsync demo: every engine (%ld node%s x %ld rank%s) verified all %ld version%s of %s in %.1f s\n",
               d.M, plural(d.M), d.L, plural(d.L), d.N, plural(d.N), d.synthetic ? d.synthetic : d.files,
               (double)(wsync_now_ns() - t0) / 1e9);
    else
        printf("wsync demo: FAILED (see the messages above)\n");
    free(procs);
    wsync_control_server_stop(server);
    return failed ? 1 : 0;
}
