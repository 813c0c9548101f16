/* demo.c: `wsync demo`: wsync's whole job on one machine. Runs the control
 * endpoint in this process, starts W trainer processes and M engine nodes of
 * L processes each, publishes N versions (each once every engine holds the
 * previous one), and succeeds only when every engine verified every version. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model.h"
#include "common/mem/mem.h"
#include "common/settings.h"
#include "common/util.h"
#include "trainer_side/control/control_server.h"

#define DEMO_MAX_PROCS 512
/* A synthetic model: the smallest one wsync_manifest_synthetic builds, and
 * far more than one machine holds several copies of. */
#define DEMO_MIN_MODEL (1ULL << 20)
#define DEMO_MAX_MODEL (1ULL << 40)

/* After a failure or a signal the children get this long to end on the
 * signal forwarded to them (they end within a second) before SIGKILL. */
#define DEMO_REAP_MS 5000

typedef struct proc {
    pid_t pid;
    int engine; /* 1 engine rank, 0 trainer */
    int status;
    int exited;
    int errfd;      /* read end of its stderr: passed on, its last line kept */
    size_t linelen; /* bytes of the line being read */
    char line[512];
    char last[512]; /* its last complete line: why it failed */
    char name[128];
} proc_t;

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

/* Starts this binary with argv; its stderr comes back through p->errfd. */
static void spawn(char *const argv[], proc_t *p)
{
    int fds[2];
    p->errfd = -1;
    if (pipe2(fds, O_CLOEXEC) != 0)
        fds[0] = fds[1] = -1;
    p->pid = fork();
    if (p->pid == 0) {
        if (fds[1] >= 0)
            dup2(fds[1], 2);
        execv("/proc/self/exe", argv);
        fprintf(stderr, "wsync demo: cannot exec %s: %m\n", argv[0]);
        _exit(127);
    }
    if (fds[1] >= 0)
        close(fds[1]);
    if (fds[0] >= 0 && p->pid > 0) {
        p->errfd = fds[0];
        fcntl(p->errfd, F_SETFL, O_NONBLOCK);
    } else if (fds[0] >= 0) {
        close(fds[0]);
    }
}

/* Passes on what child p wrote to stderr, line by line, keeping the last
 * line; at EOF closes its pipe. */
static void drain_stderr(proc_t *p)
{
    char buf[4096];
    ssize_t n, i;
    while (p->errfd >= 0 && (n = read(p->errfd, buf, sizeof(buf))) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return;
            break;
        }
        fwrite(buf, 1, (size_t)n, stderr);
        for (i = 0; i < n; i++) {
            if (buf[i] == '\n') {
                p->line[p->linelen] = '\0';
                if (p->linelen > 0)
                    memcpy(p->last, p->line, p->linelen + 1);
                p->linelen = 0;
            } else if (p->linelen + 1 < sizeof(p->line)) {
                p->line[p->linelen++] = buf[i];
            }
        }
    }
    close(p->errfd);
    p->errfd = -1;
}

/* Waits up to ms for output from any child, passing it on. */
static void pump_stderr(proc_t *procs, int nprocs, int ms)
{
    struct pollfd pf[DEMO_MAX_PROCS];
    int i, n = 0;
    for (i = 0; i < nprocs; i++)
        if (procs[i].errfd >= 0)
            pf[n++] = (struct pollfd){.fd = procs[i].errfd, .events = POLLIN};
    if (poll(pf, (nfds_t)n, ms) <= 0)
        return;
    for (i = 0; i < nprocs; i++)
        if (procs[i].errfd >= 0)
            drain_stderr(&procs[i]);
}

/* Until every engine rank ended, one child failed, a signal came or the
 * deadline passed; 1 when a child failed (said which and why). */
static int watch_children(proc_t *procs, int nprocs, int engines_left, uint64_t deadline)
{
    int i, failed = 0;
    while (engines_left > 0 && !failed && !interrupted && wsync_now_ns() < deadline) {
        int status;
        pid_t pid;
        pump_stderr(procs, nprocs, 20);
        while (!failed && (pid = waitpid(-1, &status, WNOHANG)) > 0)
            for (i = 0; i < nprocs; i++) {
                proc_t *p = &procs[i];
                if (p->pid != pid)
                    continue;
                p->exited = 1;
                p->status = status;
                engines_left -= p->engine;
                drain_stderr(p);
                if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                    continue;
                fprintf(stderr, "wsync demo: %s failed (%s %d)%s%s; stopping the others\n", p->name,
                        WIFEXITED(status) ? "exit status" : "signal",
                        WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), p->last[0] ? ": " : "", p->last);
                failed = 1;
            }
    }
    if (engines_left > 0 && !failed) {
        fprintf(stderr, "wsync demo: %s; %d engine ranks still running; stopping them\n",
                interrupted ? "interrupted" : "timed out", engines_left);
        failed = 1;
    }
    return failed;
}

/* Sends `sig` to every child still running and reaps them, SIGKILL for any
 * still there after DEMO_REAP_MS. */
static void stop_children(proc_t *procs, int nprocs, int sig)
{
    uint64_t until = wsync_now_ns() + (uint64_t)DEMO_REAP_MS * 1000000ULL;
    int i, left = 0;
    for (i = 0; i < nprocs; i++)
        if (!procs[i].exited && procs[i].pid > 0) {
            kill(procs[i].pid, sig);
            left++;
        }
    while (left > 0) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0) {
            if (wsync_now_ns() >= until) {
                for (i = 0; i < nprocs; i++)
                    if (!procs[i].exited && procs[i].pid > 0) {
                        fprintf(stderr, "wsync demo: %s did not stop in %d s; killing it\n", procs[i].name,
                                DEMO_REAP_MS / 1000);
                        kill(procs[i].pid, SIGKILL);
                    }
                until = UINT64_MAX;
            }
            pump_stderr(procs, nprocs, 20);
            continue;
        }
        for (i = 0; i < nprocs; i++)
            if (procs[i].pid == pid && !procs[i].exited) {
                procs[i].exited = 1;
                left--;
            }
    }
    for (i = 0; i < nprocs; i++)
        drain_stderr(&procs[i]);
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
    int nprocs = 0, i, o, bad = 0, failed = 0;
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
    if (strcmp(transport, "nccl") == 0 && wsync_cuda_device_count() == 0) {
        fprintf(stderr, "wsync demo: --transport nccl needs a CUDA device, and there is none here (or wsync was "
                        "built without CUDA); use --transport tcp\n");
        return 1;
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
    if ((o = check_model(synthetic, files)) != 0)
        return o;
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
        spawn(args, &procs[nprocs++]);
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
        spawn(args, &procs[nprocs++]);
    }
    /* Engines end on their own after N versions; a trainer that ends early
     * failed, and so does the demo at once. */
    deadline = t0 + (uint64_t)timeout_s * 1000000000ULL;
    failed = watch_children(procs, nprocs, (int)(M * L), deadline);
    stop_children(procs, nprocs, interrupted ? interrupted : SIGTERM);
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
