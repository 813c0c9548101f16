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
#include <sys/wait.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "common/mem/mem.h"
#include "common/settings.h"
#include "common/util.h"
#include "trainer_side/control/control_server.h"

#define DEMO_MAX_PROCS 512
/* A synthetic model: the smallest one wsync_manifest_synthetic builds, and
 * far more than one machine holds several copies of. */
#define DEMO_MIN_MODEL (1ULL << 20)
#define DEMO_MAX_MODEL (1ULL << 40)

typedef struct proc {
    pid_t pid;
    int engine; /* 1 engine rank, 0 trainer */
    int status;
    int exited;
    char name[128];
} proc_t;

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: wsync demo [--trainers W] [--engines M] [--local-ranks L]\n"
            "                  [--synthetic SIZE | --safetensors F1,F2,...] [--versions N] [--dump DIR]\n"
            "                  [--mode staged|in-place] [--transport auto|tcp|nccl|verbs|local] [--chunk SIZE]\n"
            "                  [--layout even|fsdp] [--timeout-s S] [--device host|cuda] [--host-id PREFIX]\n"
            "                  [--tp T [--rules FILE]] [--plan auto|direct|relay:F] [--config FILE]\n"
            "                  [--set SETTING=VALUE]...\n"
            "Defaults: 2 trainers, 2 engine nodes x 2 local ranks, a 1 GiB synthetic LLM, 3 versions.\n"
            "  --device cuda      trainer rank i on GPU i %% G, engine local rank j on GPU j %% G (G GPUs here)\n"
            "  --host-id PREFIX   trainers claim host PREFIX-trainers and engine node k host PREFIX-e<k>,\n"
            "                     as if each ran on its own machine\n"
            "  --tp T             each node's L local ranks form L/T tensor-parallel groups of T (engine\n"
            "                     layouts, docs/ENGINE_LAYOUTS.md); L must be a multiple of T\n"
            "  --plan P           the engines' plan setting (relay:F: nodes relay to each other)\n"
            "  --config FILE      read settings and these options from FILE's \"demo\" object (docs/CONFIG.md;\n"
            "                     flags given here override the file); its settings and --set's reach the\n"
            "                     trainers and engines too\n");
}

static const char *plural(long n)
{
    return n == 1 ? "" : "s";
}

static pid_t spawn(char *const argv[])
{
    pid_t pid = fork();
    if (pid == 0) {
        execv("/proc/self/exe", argv);
        fprintf(stderr, "wsync demo: cannot exec %s: %m\n", argv[0]);
        _exit(127);
    }
    return pid;
}

const struct option cli_demo_options[] = {{"trainers", 1, 0, 'W'},
                                          {"engines", 1, 0, 'M'},
                                          {"local-ranks", 1, 0, 'L'},
                                          {"synthetic", 1, 0, 's'},
                                          {"safetensors", 1, 0, 'f'},
                                          {"versions", 1, 0, 'n'},
                                          {"dump", 1, 0, 'D'},
                                          {"mode", 1, 0, 'm'},
                                          {"transport", 1, 0, 't'},
                                          {"chunk", 1, 0, 'k'},
                                          {"layout", 1, 0, 'y'},
                                          {"timeout-s", 1, 0, 'T'},
                                          {"device", 1, 0, 'd'},
                                          {"host-id", 1, 0, 'H'},
                                          {"tp", 1, 0, 'P'},
                                          {"rules", 1, 0, 'R'},
                                          {"plan", 1, 0, 'p'},
                                          {"help", 0, 0, 'h'},
                                          {0, 0, 0, 0}};

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

int cmd_demo(int argc, char **argv)
{
    const struct option *opts = cli_demo_options;
    const char *device = "host", *host_id = NULL, *tp = NULL, *rules = NULL;
    int ngpus = 0;
    const char *synthetic = NULL, *files = NULL, *dumpdir = NULL, *mode = "staged", *transport = "tcp",
               *chunk = "64M", *layout = "even";
    long W = 2, M = 2, L = 2, N = 3, T = 0, timeout_s = 600;
    uint64_t checked = 0; /* sizes are checked here; the processes get the text */
    wsync_control_server_t *server = NULL;
    wsync_control_server_config_t sc = {.listen = "127.0.0.1:0"};
    proc_t *procs = NULL;
    int nprocs = 0, i, o, bad = 0, failed = 0, engines_left;
    uint64_t t0, deadline;
    char url[256], wbuf[24], nbuf[24], mbuf[24], lbuf[24], rbuf[24], ebuf[48], dbuf[32], hbuf[160];

    if ((o = cli_config_apply("demo", &argc, &argv)) != 0)
        return o;
    optind = 1;
    while (bad == 0 && (o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'W': bad = cli_parse_long("demo", "--trainers", optarg, 1, DEMO_MAX_PROCS, &W); break;
        case 'M': bad = cli_parse_long("demo", "--engines", optarg, 1, DEMO_MAX_PROCS, &M); break;
        case 'L': bad = cli_parse_long("demo", "--local-ranks", optarg, 1, DEMO_MAX_PROCS, &L); break;
        /* The later of --synthetic / --safetensors wins (a flag over a file's). */
        case 's':
            synthetic = optarg;
            files = NULL;
            bad = cli_parse_size("demo", "--synthetic", optarg, DEMO_MIN_MODEL, DEMO_MAX_MODEL, &checked);
            break;
        case 'f':
            files = optarg;
            synthetic = NULL;
            break;
        case 'n': bad = cli_parse_long("demo", "--versions", optarg, 1, INT_MAX, &N); break;
        case 'D': dumpdir = optarg; break;
        case 'm': mode = optarg; break;
        case 't': transport = optarg; break;
        case 'k':
            chunk = optarg;
            bad = cli_parse_size("demo", "--chunk", optarg, CLI_MIN_CHUNK, CLI_MAX_CHUNK, &checked);
            break;
        case 'y': layout = optarg; break;
        case 'T': bad = cli_parse_long("demo", "--timeout-s", optarg, 1, INT_MAX, &timeout_s); break;
        case 'd': device = optarg; break;
        case 'H': host_id = optarg; break;
        case 'P':
            tp = optarg;
            bad = cli_parse_long("demo", "--tp", optarg, 1, DEMO_MAX_PROCS, &T);
            break;
        case 'R': rules = optarg; break;
        case 'p': bad = cli_set_plan("demo", optarg); break;
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
    if (W + M * L > DEMO_MAX_PROCS) {
        fprintf(stderr, "wsync demo: --trainers %ld + --engines %ld x --local-ranks %ld is more than %d processes\n",
                W, M, L, DEMO_MAX_PROCS);
        return 2;
    }
    if (synthetic == NULL && files == NULL)
        synthetic = "1G";
    if ((tp && L % T != 0) || (rules && tp == NULL)) {
        fprintf(stderr,
                "wsync demo: --tp T needs T >= 1 dividing --local-ranks (%ld), and --rules goes with --tp\n", L);
        return 2;
    }
    if (strcmp(device, "cuda") == 0) {
        /* Counted here, before any rank starts: ranks go round-robin. */
        ngpus = wsync_cuda_device_count();
        if (ngpus == 0) {
            fprintf(stderr, "wsync demo: --device cuda: no CUDA device here (or wsync was built without CUDA); "
                            "use --device host\n");
            return 1;
        }
    } else if (strcmp(device, "host") != 0) {
        fprintf(stderr, "wsync demo: --device must be host or cuda (ranks are placed on GPUs round-robin)\n");
        return 2;
    }
    if (host_id == NULL && wsync_setting_str(WSYNC_SET_HOST_ID)[0] == '\0') {
        /* Engine nodes find their board by (host id, engine id): give this
         * demo's processes a host id of their own so two demos (or a demo and
         * a test) on one machine never share a board. */
        char hn[64], hid[128];
        if (gethostname(hn, sizeof(hn)) != 0)
            snprintf(hn, sizeof(hn), "localhost");
        hn[sizeof(hn) - 1] = '\0';
        snprintf(hid, sizeof(hid), "%s.demo%d", hn, (int)getpid());
        setenv("WSYNC_HOST_ID", hid, 1);
    }
    export_settings();
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);
    if (wsync_control_server_start(&sc, &server) != WSYNC_OK) {
        cli_report("demo", "cannot start the control endpoint", WSYNC_ERR_IO);
        return 1;
    }
    snprintf(url, sizeof(url), "%s", wsync_control_server_url(server));
    printf("wsync demo: control endpoint %s  (watch it: wsync status --control %s --watch)\n", url, url);
    printf("wsync demo: %ld trainer rank%s -> %ld engine node%s x %ld local rank%s, model %s, %ld version%s, "
           "%s mode, transport %s, device %s",
           W, plural(W), M, plural(M), L, plural(L), synthetic ? synthetic : files, N, plural(N), mode, transport,
           device);
    if (tp)
        printf(", %ld TP group%s of %ld per node", L / T, plural(L / T), T);
    if (ngpus > 0)
        printf(" (%d GPUs, ranks round-robin)", ngpus);
    printf("\n");
    fflush(stdout);
    procs = calloc(DEMO_MAX_PROCS, sizeof(*procs));
    snprintf(wbuf, sizeof(wbuf), "%ld", W);
    snprintf(nbuf, sizeof(nbuf), "%ld", N);
    snprintf(mbuf, sizeof(mbuf), "%ld", M);
    snprintf(lbuf, sizeof(lbuf), "%ld", L);
    t0 = wsync_now_ns();
    for (i = 0; i < M * L; i++) {
        char *args[40];
        int a = 0;
        snprintf(ebuf, sizeof(ebuf), "e%ld", (long)(i / L));
        snprintf(rbuf, sizeof(rbuf), "%ld", (long)(i % L));
        args[a++] = "wsync";
        args[a++] = "engine";
        args[a++] = "--control";
        args[a++] = url;
        args[a++] = "--engine";
        args[a++] = ebuf;
        args[a++] = "--local-rank";
        args[a++] = rbuf;
        args[a++] = "--local-world";
        args[a++] = lbuf;
        args[a++] = "--versions";
        args[a++] = nbuf;
        args[a++] = "--mode";
        args[a++] = (char *)mode;
        args[a++] = "--transport";
        args[a++] = (char *)transport;
        args[a++] = "--timeout-ms";
        args[a++] = "300000";
        if (dumpdir) {
            args[a++] = "--dump";
            args[a++] = (char *)dumpdir;
        }
        if (tp) {
            args[a++] = "--tp";
            args[a++] = (char *)tp;
        }
        if (rules) {
            args[a++] = "--rules";
            args[a++] = (char *)rules;
        }
        if (ngpus > 0) {
            snprintf(dbuf, sizeof(dbuf), "cuda:%ld", (long)(i % L) % ngpus);
            args[a++] = "--device";
            args[a++] = dbuf;
        }
        if (host_id) {
            snprintf(hbuf, sizeof(hbuf), "%s-%s", host_id, ebuf);
            args[a++] = "--host-id";
            args[a++] = hbuf;
        }
        args[a] = NULL;
        procs[nprocs].engine = 1;
        snprintf(procs[nprocs].name, sizeof(procs[0].name), "engine %s rank %s", ebuf, rbuf);
        procs[nprocs++].pid = spawn(args);
    }
    for (i = 0; i < W; i++) {
        char *args[32];
        int a = 0;
        snprintf(rbuf, sizeof(rbuf), "%d", i);
        args[a++] = "wsync";
        args[a++] = "trainer";
        args[a++] = "--control";
        args[a++] = url;
        args[a++] = "--rank";
        args[a++] = rbuf;
        args[a++] = "--world";
        args[a++] = wbuf;
        args[a++] = synthetic ? "--synthetic" : "--safetensors";
        args[a++] = (char *)(synthetic ? synthetic : files);
        args[a++] = "--versions";
        args[a++] = nbuf;
        args[a++] = "--wait-engines";
        args[a++] = mbuf;
        args[a++] = "--chunk";
        args[a++] = (char *)chunk;
        args[a++] = "--layout";
        args[a++] = (char *)layout;
        if (ngpus > 0) {
            snprintf(dbuf, sizeof(dbuf), "cuda:%d", i % ngpus);
            args[a++] = "--device";
            args[a++] = dbuf;
        }
        if (host_id) {
            snprintf(hbuf, sizeof(hbuf), "%s-trainers", host_id);
            args[a++] = "--host-id";
            args[a++] = hbuf;
        }
        args[a] = NULL;
        procs[nprocs].engine = 0;
        snprintf(procs[nprocs].name, sizeof(procs[0].name), "trainer rank %d", i);
        procs[nprocs++].pid = spawn(args);
    }
    /* Engines end on their own after N versions; a trainer that ends early failed. */
    deadline = t0 + (uint64_t)timeout_s * 1000000000ULL;
    engines_left = (int)(M * L);
    while (engines_left > 0 && !interrupted && wsync_now_ns() < deadline) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0) {
            usleep(20000);
            continue;
        }
        for (i = 0; i < nprocs; i++)
            if (procs[i].pid == pid) {
                procs[i].exited = 1;
                procs[i].status = status;
                if (procs[i].engine)
                    engines_left--;
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                    fprintf(stderr, "wsync demo: %s ended with %s %d\n", procs[i].name,
                            WIFEXITED(status) ? "status" : "signal",
                            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
                    failed = 1;
                }
            }
        if (failed)
            break;
    }
    if (engines_left > 0 && !failed) {
        fprintf(stderr, "wsync demo: %s; %d engine ranks still running\n",
                interrupted ? "interrupted" : "timed out", engines_left);
        failed = 1;
    }
    for (i = 0; i < nprocs; i++)
        if (!procs[i].exited)
            kill(procs[i].pid, SIGTERM);
    for (i = 0; i < nprocs; i++)
        if (!procs[i].exited)
            waitpid(procs[i].pid, NULL, 0);
    if (!failed)
        printf("wsync demo: every engine (%ld node%s x %ld rank%s) verified all %ld version%s of %s in %.1f s\n",
               M, plural(M), L, plural(L), N, plural(N), synthetic ? synthetic : files,
               (double)(wsync_now_ns() - t0) / 1e9);
    else
        printf("wsync demo: FAILED (see the messages above)\n");
    free(procs);
    wsync_control_server_stop(server);
    return failed ? 1 : 0;
}
