/* calibrate.c: `wsync calibrate`: measures the link classes this machine has
 * (host memcpy, the digest on one core, the host pack, tcp over loopback or
 * to a --serve peer, and with CUDA devices the copy engine, host <-> GPU,
 * GPU peers and the digest kernel, a control endpoint's round trip on
 * loopback), several repetitions each, and writes a
 * links file (common/cost/cost.h's schema) with the median and the spread.
 * Classes it cannot measure here are written "present": false with why. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/calibrate.h"
#include "cli/commands.h"
#include "common/digest/digest.h"
#include "common/mem/mem.h"
#include "common/pack/pack.h"
#include "common/base/util.h"

#define CALIB_USAGE                                                                                     \
    "usage: wsync calibrate [--out FILE] [--peer HOST:PORT] [--tcp-class tcp|tcp_trainer|tcp_engine]\n" \
    "                       [--base FILE] [--reps N] [--size SIZE]\n"                                   \
    "       wsync calibrate --serve HOST:PORT   (the peer side of --peer, until killed)\n"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double calib_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return v[n / 2];
}

void calib_set(calib_t *cb, cost_class_t c, const double *rates, int reps, double alpha_s, const char *note)
{
    cost_link_t *l = &cb->links.link[c];
    double s[64];
    memcpy(s, rates, (size_t)reps * sizeof(double));
    memset(l, 0, sizeof(*l));
    l->present = 1;
    l->bw = calib_median(s, reps);
    l->bw_min = s[0];
    l->bw_max = s[reps - 1];
    l->alpha_s = alpha_s;
    l->reps = reps;
    snprintf(cb->note[c], CALIB_NOTE_LEN, "%s", note);
    fprintf(cb->log, "%-12s median %9.2f GB/s (min %.2f, max %.2f), %d reps", cost_class_name(c), l->bw / 1e9,
            l->bw_min / 1e9, l->bw_max / 1e9, reps);
    if (alpha_s > 0)
        fprintf(cb->log, ", alpha %.1f us", alpha_s * 1e6);
    fprintf(cb->log, ": %s\n", note);
}

void calib_set_time(calib_t *cb, cost_class_t c, double *times, int reps, const char *what)
{
    cost_link_t *l = &cb->links.link[c];
    memset(l, 0, sizeof(*l));
    l->present = 1;
    l->alpha_s = calib_median(times, reps);
    l->reps = reps;
    snprintf(cb->note[c], CALIB_NOTE_LEN, "%s (min %.0f, max %.0f us)", what, times[0] * 1e6, times[reps - 1] * 1e6);
    fprintf(cb->log, "%-12s alpha %.1f us: %s\n", cost_class_name(c), l->alpha_s * 1e6, cb->note[c]);
}

void calib_absent(calib_t *cb, cost_class_t c, const char *why)
{
    memset(&cb->links.link[c], 0, sizeof(cb->links.link[c]));
    snprintf(cb->note[c], CALIB_NOTE_LEN, "%s", why);
    fprintf(cb->log, "%-12s %s\n", cost_class_name(c), why);
}

/* Host memory: memcpy, the digest on this thread, and a pack of a column
 * slice (rows of 4 KiB out of 8 KiB rows: what a TP=2 rank's columns are). */
static int calib_host(calib_t *cb)
{
    char *a = malloc(cb->bytes), *b = malloc(cb->bytes);
    double mc[64], dg[64], pk[64];
    wsync_run2d_t run = {.src_off = 0, .src_stride = 8192, .row_bytes = 4096, .rows = cb->bytes / 8192, .dst_off = 0};
    volatile uint64_t sink = 0;
    int i;
    if (a == NULL || b == NULL) {
        free(a);
        free(b);
        fprintf(stderr, "wsync calibrate: out of memory for two buffers of %zu bytes\n", cb->bytes);
        return 1;
    }
    memset(a, 0x3c, cb->bytes);
    memset(b, 0, cb->bytes);
    for (i = -1; i < cb->reps; i++) { /* -1: a warm-up pass */
        uint64_t t0 = wsync_now_ns(), t1, t2, t3;
        memcpy(b, a, cb->bytes);
        t1 = wsync_now_ns();
        sink += wsync_digest_sum(a, cb->bytes, 0);
        t2 = wsync_now_ns();
        wsync_pack_host(b, a, &run, 1);
        t3 = wsync_now_ns();
        if (i >= 0) {
            mc[i] = cb->bytes / ((t1 - t0) / 1e9);
            dg[i] = cb->bytes / ((t2 - t1) / 1e9);
            pk[i] = (double)run.rows * run.row_bytes / ((t3 - t2) / 1e9);
        }
    }
    (void)sink;
    calib_set(cb, COST_HOST_MEMCPY, mc, cb->reps, 0, "memcpy between two private buffers, one thread");
    calib_set(cb, COST_DIGEST_HOST, dg, cb->reps, 0, "wsync_digest on one thread");
    calib_set(cb, COST_PACK_HOST, pk, cb->reps, 0, "gather of 4 KiB rows out of 8 KiB rows, one thread");
    free(a);
    free(b);
    return 0;
}

static void calib_verbs(calib_t *cb)
{
    DIR *d = opendir("/sys/class/infiniband");
    struct dirent *e;
    int n = 0;
    char why[CALIB_NOTE_LEN];
    while (d != NULL && (e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    if (d != NULL)
        closedir(d);
    if (n == 0)
        snprintf(why, sizeof(why), "verbs: not present (no RDMA device)");
    else
        snprintf(why, sizeof(why),
                 "verbs: %d RDMA device%s present, not measured by calibrate (give nic_put by hand "
                 "from ib_write_bw)",
                 n, n == 1 ? "" : "s");
    calib_absent(cb, COST_NIC_PUT, why);
    calib_absent(cb, COST_NIC_STAGED, "nccl across hosts: not measured by calibrate");
}

static int write_out(const calib_t *cb, const char *path)
{
    json_t *j = cost_links_to_json(&cb->links), *links = json_object_get(j, "links");
    FILE *f = path ? fopen(path, "w") : stdout;
    int i, rc = 0;
    for (i = 0; i < COST_CLASS_COUNT; i++)
        if (cb->note[i][0])
            json_object_set_new(json_object_get(links, cost_class_name(i)), "note", json_string(cb->note[i]));
    if (f == NULL) {
        fprintf(stderr, "wsync calibrate: --out %s: cannot write it: %s\n", path, strerror(errno));
        rc = 1;
    } else if (json_dumpf(j, f, JSON_INDENT(2) | JSON_REAL_PRECISION(6)) != 0 || fputc('\n', f) == EOF ||
               (path && fclose(f) != 0)) {
        fprintf(stderr, "wsync calibrate: --out %s: write failed\n", path ? path : "(stdout)");
        rc = 1;
    }
    json_decref(j);
    return rc;
}

int cmd_calibrate(int argc, char **argv)
{
    static const struct option opts[] = {{"out", 1, 0, 'o'},       {"peer", 1, 0, 'p'},  {"reps", 1, 0, 'r'},
                                         {"size", 1, 0, 's'},      {"serve", 1, 0, 'S'}, {"help", 0, 0, 'h'},
                                         {"tcp-class", 1, 0, 'c'}, {"base", 1, 0, 'b'},  {0, 0, 0, 0}};
    const char *out = NULL, *peer = NULL, *serve = NULL, *base = NULL;
    uint64_t size = 64ull << 20;
    calib_t cb;
    char host[256];
    int c, i;

    memset(&cb, 0, sizeof(cb));
    cb.reps = 5;
    cb.tcp_class = COST_TCP;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'p': peer = optarg; break;
        case 'S': serve = optarg; break;
        case 'b': base = optarg; break;
        case 'c':
            if (strcmp(optarg, "tcp") == 0 || strcmp(optarg, "tcp_trainer") == 0 ||
                strcmp(optarg, "tcp_engine") == 0) {
                cb.tcp_class = optarg[3] == '\0'  ? COST_TCP
                               : optarg[4] == 't' ? COST_TCP_TRAINER
                                                  : COST_TCP_ENGINE;
            } else {
                fprintf(stderr,
                        "wsync calibrate: --tcp-class: expected tcp, tcp_trainer (a trainer host's uplink: run on "
                        "it, --peer on an engine host) or tcp_engine (between engine hosts), got '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'r':
            if (cli_parse_int("calibrate", "--reps", optarg, 3, 64, &cb.reps))
                return 2;
            break;
        case 's':
            if (cli_parse_size("calibrate", "--size", optarg, 1ull << 20, 16ull << 30, &size))
                return 2;
            break;
        case 'h':
            printf(CALIB_USAGE "Measures this machine's link classes (--reps N times each, default 5, of --size\n"
                               "bytes, default 64M) and writes a links file (median, min, max) to --out FILE or\n"
                               "stdout, for `wsync plan --predict --links FILE`. tcp runs over loopback unless\n"
                               "--peer names a `wsync calibrate --serve` on another host. GPU classes need CUDA\n"
                               "devices (else each says 'skipped: no CUDA device'). --tcp-class writes the tcp\n"
                               "measure as that class (a trainer host's uplink, or between engine hosts);\n"
                               "--base FILE starts from that links file: the classes this run does not measure\n"
                               "keep its figures (two runs, one per host role, make one file).\n");
            return 0;
        default: fprintf(stderr, CALIB_USAGE); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "wsync calibrate: unexpected argument '%s'\n%s", argv[optind], CALIB_USAGE);
        return 2;
    }
    if (serve)
        return calib_serve(serve);
    cb.bytes = (size_t)size;
    cb.log = out ? stdout : stderr;
    if (gethostname(host, sizeof(host)) != 0)
        snprintf(host, sizeof(host), "this host");
    snprintf(cb.links.machine, sizeof(cb.links.machine), "%.100s (wsync calibrate)", host);
    snprintf(cb.links.source, sizeof(cb.links.source),
             "wsync calibrate on %.100s: %d repetitions of %llu bytes per class (GPU classes: at least 1 GiB); "
             "gbps "
             "is the median, min_gbps and max_gbps the spread",
             host, cb.reps, (unsigned long long)size);
    cb.links.host_gpus = wsync_cuda_device_count();
    cb.links.host_nics = 1;
    for (i = 0; i < COST_CLASS_COUNT; i++)
        snprintf(cb.note[i], CALIB_NOTE_LEN, "not measured");
    if (base != NULL) {
        cost_links_t b;
        wsync_status_t st = cost_links_load(base, &b);
        if (st != WSYNC_OK) {
            fprintf(stderr, "wsync calibrate: --base: %s\n", wsync_last_error());
            return 2;
        }
        memcpy(cb.links.link, b.link, sizeof(b.link));
        for (i = 0; i < COST_CLASS_COUNT; i++)
            if (b.link[i].present)
                snprintf(cb.note[i], CALIB_NOTE_LEN, "kept from %.120s", base);
    }
    if (calib_host(&cb) != 0)
        return 1;
    if (calib_tcp(&cb, peer) != WSYNC_OK) {
        fprintf(stderr, "wsync calibrate: tcp%s%s: %s\n", peer ? " to " : " over loopback", peer ? peer : "",
                wsync_last_error());
        return 1;
    }
    calib_control(&cb);
    calib_gpu(&cb);
    calib_delta(&cb);
    calib_quant(&cb);
    calib_version(&cb);
    calib_verbs(&cb);
    return write_out(&cb, out);
}
