/* plan.c: `wsync plan`: the plan of a model and a topology, summarized: what
 * each trainer rank sends, what each engine local rank lands from the network
 * and what it copies out of its peers' windows. Pure arithmetic; no I/O
 * besides reading the safetensors header. */
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/plan_nodes.h"
#include "cli/plan_predict.h"
#include "common/model/plan.h"
#include "common/model/safetensors.h"
#include "common/base/status.h"
#include "common/base/util.h"

#define PLAN_USAGE                                                                                       \
    "usage: wsync plan (FILE.safetensors | --synthetic SIZE) [--trainers W] [--engines M]\n"             \
    "                  [--local-ranks L] [--chunk SIZE] [--layout even|fsdp] [--tp T[,T...]]\n"          \
    "                  [--rules FILE] [--json]\n"                                                        \
    "       wsync plan ... --links FILE --predict [--trainer-hosts H] [--replica-gpus G]\n"              \
    "                  [--memory gpu|host] [--transport put|staged|tcp|local] [--publish slot|single]\n" \
    "                  [--delta on|off|auto] [--delta-density F] [--delta-width 1|2|4|8]\n"              \
    "                  [--quant fp8]\n"                                                                  \
    "                  [--scenarios] [--json]\n"

/* Upper bounds keep a typo (--trainers 1e9) from allocating gigabytes; they
 * are far above any real deployment. */
#define PLAN_MAX_TRAINERS 1000000
#define PLAN_MAX_ENGINES 1000000
#define PLAN_MAX_LOCAL 4096

typedef struct plan_opts {
    const char *file;
    const char *synthetic;
    int trainers, engines, local_ranks;
    uint64_t chunk;
    int fsdp;
    int json;
    const char *tp; /* per-node TP sizes, or NULL: every rank holds the whole image */
    const char *rules;
    int predict;
    plan_predict_opts_t pr;
} plan_opts_t;

/* What one local rank of a node does: lands from the network, copies from
 * its peers' windows, is copied from by its peers. */
typedef struct local_stat {
    uint32_t chunks;
    uint64_t land;
    uint64_t copy_in;
    uint64_t copied_out;
} local_stat_t;

static void plan_help(void)
{
    printf(PLAN_USAGE
           "Prints the plan: image size, chunks, pieces, the bytes each trainer rank sends to one\n"
           "engine node and to all M nodes, the bytes each local rank of a node lands from the\n"
           "network (chunk c lands on local rank c %% L) and the bytes it copies out of its peers'\n"
           "windows. Defaults: --trainers 2 --engines 2 --local-ranks 2 --chunk 64M --layout even.\n"
           "--tp T: the node's ranks hold a tensor-parallel layout by the rules (built-in vLLM, or\n"
           "--rules FILE), TP rank = local rank mod T; per node it shows the bytes that cross into\n"
           "it and per rank the bytes it lands and holds. --tp 4,2,image gives node 0 TP=4, node 1\n"
           "TP=2 and the other nodes the whole image (the last value repeats). --json always lists\n"
           "the nodes (\"nodes\": [{network_bytes, ranks: [{land_bytes, holds_bytes}]}]).\n"
           "--predict: one version's time per candidate plan (direct, relay:F, direct+own) on the links\n"
           "of FILE (configs/links/, or `wsync calibrate`; default: the links setting), with the\n"
           "bottleneck, bytes per link class and the stages, and the plan plan=auto would choose.\n"
           "--trainer-hosts H (default: trainers / the file's GPUs per host), --replica-gpus G (a\n"
           "replica of G GPUs holds the image sharded: G > L spans G/L nodes), --memory, --transport\n"
           "(default: gpu and puts when the file has them; local: trainers and engines share one GPU,\n"
           "colocated). --publish slot: the trainers copy each version into a publish slot before\n"
           "their puts go (default single: single copy). --scenarios costs the reference scenarios\n"
           "of docs/COST_MODEL.md on a host of --local-ranks GPUs instead. SIZE may exceed 64G here.\n"
           "--delta-density F: cost delta pulls (docs/DELTA.md) where a fraction F of the elements\n"
           "changed since the engines' base (--delta-width bytes each, default 2: bf16; 1 for FP8):\n"
           "the trainers encode, the wire carries the chosen form's bytes, the landing ranks copy the\n"
           "base and apply. --delta on: delta plans only; off: full only; auto (the default with a\n"
           "density): both, and the faster is chosen.\n"
           "--quant fp8: the trainers publish SIZE bytes of bf16 and quantize them to 128 x 128 block\n"
           "FP8 with fp32 scales (docs/FP8.md) before their digests: a serial stage at quant_gpu or\n"
           "quant_host, then everything carries the FP8 image (0.5001 of the bytes); --delta-width\n"
           "defaults to 1.\n");
}

/* --delta, --delta-density, --delta-width into `pr`; 0, or 2 after a message. */
static int parse_delta_opt(int c, const char *arg, plan_predict_opts_t *pr)
{
    if (c == 1008) {
        pr->delta = arg;
    } else if (c == 1009) {
        if (cli_parse_fraction("plan", "--delta-density", arg, &pr->delta_density))
            return 2;
    } else if (cli_parse_int("plan", "--delta-width", arg, 1, 8, &pr->delta_width) ||
               (pr->delta_width & (pr->delta_width - 1)) != 0) {
        fprintf(stderr, "wsync plan: --delta-width: expected 1, 2, 4 or 8 (bytes per element)\n");
        return 2;
    }
    return 0;
}

/* Returns 0 when the options are good, 2 (usage error) or -1 (--help given). */
static int parse_opts(int argc, char **argv, plan_opts_t *o)
{
    static const struct option opts[] = {{"synthetic", 1, 0, 's'},
                                         {"trainers", 1, 0, 'w'},
                                         {"engines", 1, 0, 'm'},
                                         {"local-ranks", 1, 0, 'l'},
                                         {"chunk", 1, 0, 'c'},
                                         {"layout", 1, 0, 'y'},
                                         {"json", 0, 0, 'j'},
                                         {"help", 0, 0, 'h'},
                                         {"tp", 1, 0, 't'},
                                         {"rules", 1, 0, 'r'},
                                         {"links", 1, 0, 1000},
                                         {"predict", 0, 0, 1001},
                                         {"scenarios", 0, 0, 1002},
                                         {"trainer-hosts", 1, 0, 1003},
                                         {"replica-gpus", 1, 0, 1004},
                                         {"memory", 1, 0, 1005},
                                         {"transport", 1, 0, 1006},
                                         {"publish", 1, 0, 1007},
                                         {"delta", 1, 0, 1008},
                                         {"delta-density", 1, 0, 1009},
                                         {"delta-width", 1, 0, 1010},
                                         {"quant", 1, 0, 1011},
                                         {0, 0, 0, 0}};
    int c;

    *o = (plan_opts_t){.trainers = 2, .engines = 2, .local_ranks = 2, .chunk = WSYNC_DEFAULT_CHUNK};
    optind = 1;
    opterr = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 's': o->synthetic = optarg; break;
        case 'w':
            if (cli_parse_int("plan", "--trainers", optarg, 1, PLAN_MAX_TRAINERS, &o->trainers))
                return 2;
            break;
        case 'm':
            if (cli_parse_int("plan", "--engines", optarg, 1, PLAN_MAX_ENGINES, &o->engines))
                return 2;
            break;
        case 'l':
            if (cli_parse_int("plan", "--local-ranks", optarg, 1, PLAN_MAX_LOCAL, &o->local_ranks))
                return 2;
            break;
        case 'c':
            if (cli_parse_size("plan", "--chunk", optarg, CLI_MIN_CHUNK, CLI_MAX_CHUNK, &o->chunk))
                return 2;
            break;
        case 'y':
            if (strcmp(optarg, "even") == 0) {
                o->fsdp = 0;
            } else if (strcmp(optarg, "fsdp") == 0) {
                o->fsdp = 1;
            } else {
                fprintf(stderr, "wsync plan: --layout: expected 'even' or 'fsdp', got '%s'\n", optarg);
                return 2;
            }
            break;
        case 'j': o->json = 1; break;
        case 't': o->tp = optarg; break;
        case 'r': o->rules = optarg; break;
        case 1000: o->pr.links = optarg; break;
        case 1001: o->predict = 1; break;
        case 1002: o->pr.scenarios = 1; break;
        case 1003:
            if (cli_parse_int("plan", "--trainer-hosts", optarg, 1, PLAN_MAX_TRAINERS, &o->pr.trainer_hosts))
                return 2;
            break;
        case 1004:
            if (cli_parse_int("plan", "--replica-gpus", optarg, 1, PLAN_MAX_ENGINES, &o->pr.replica_gpus))
                return 2;
            break;
        case 1005: o->pr.memory = optarg; break;
        case 1006: o->pr.net = optarg; break;
        case 1007: o->pr.publish = optarg; break;
        case 1011: o->pr.quant = optarg; break;
        case 'h': plan_help(); return -1;
        default:
            if (c >= 1008 && c <= 1010 && parse_delta_opt(c, optarg, &o->pr) == 0) /* --delta* */
                break;
            if (c < 1008 || c > 1010)
                fprintf(stderr, PLAN_USAGE); /* getopt already said which option was wrong */
            return 2;
        }
    }
    if (optind < argc - 1) {
        fprintf(stderr, "wsync plan: one model file expected, got '%s' and '%s'\n%s", argv[optind],
                argv[optind + 1], PLAN_USAGE);
        return 2;
    }
    if (optind == argc - 1)
        o->file = argv[optind];
    if ((o->file == NULL) == (o->synthetic == NULL)) {
        fprintf(stderr, "wsync plan: give either a safetensors file or --synthetic SIZE, %s\n%s",
                o->file ? "not both" : "none was given", PLAN_USAGE);
        return 2;
    }
    return 0;
}

/* "512.00 MiB (536870912)": readable, and exact for scripts that diff it. */
static const char *both(uint64_t bytes, char *buf, size_t len)
{
    char h[32];
    snprintf(buf, len, "%s (%llu)", wsync_fmt_size(bytes, h, sizeof(h)), (unsigned long long)bytes);
    return buf;
}

static void local_stats(const wsync_plan_t *p, int L, local_stat_t *ls)
{
    uint32_t c;
    size_t i;
    int r;
    memset(ls, 0, (size_t)L * sizeof(*ls));
    for (c = 0; c < p->nchunks; c++)
        ls[wsync_plan_land_rank(p, c, L)].chunks++;
    for (i = 0; i < p->npieces; i++)
        ls[wsync_plan_land_rank(p, p->pieces[i].chunk, L)].land += p->pieces[i].len;
    /* Every local rank needs the whole image: what it did not land itself it
     * copies from the peer that landed it, and each of its L-1 peers copies
     * everything it landed. */
    for (r = 0; r < L; r++) {
        ls[r].copy_in = p->image_size - ls[r].land;
        ls[r].copied_out = ls[r].land * (uint64_t)(L - 1);
    }
}

static json_t *plan_json(const plan_opts_t *o, const wsync_manifest_t *m, const wsync_plan_t *p,
                         const local_stat_t *ls, const plan_nodes_t *pn)
{
    json_t *j = json_object(), *tr = json_array(), *lr = json_array();
    uint64_t M = (uint64_t)o->engines, L = (uint64_t)o->local_ranks;
    int r;

    json_object_set_new(j, "source", json_string(o->file ? o->file : "synthetic"));
    json_object_set_new(j, "tensors", json_integer((json_int_t)m->ntensors));
    json_object_set_new(j, "image_size", json_integer((json_int_t)p->image_size));
    json_object_set_new(j, "chunk_size", json_integer((json_int_t)p->chunk_size));
    json_object_set_new(j, "chunks", json_integer(p->nchunks));
    json_object_set_new(j, "pieces", json_integer((json_int_t)p->npieces));
    json_object_set_new(j, "layout", json_string(o->fsdp ? "fsdp" : "even"));
    json_object_set_new(j, "trainers", json_integer(o->trainers));
    json_object_set_new(j, "engines", json_integer(o->engines));
    json_object_set_new(j, "local_ranks", json_integer(o->local_ranks));
    for (r = 0; r < p->world; r++) {
        uint64_t b = wsync_plan_rank_send_bytes(p, r);
        json_array_append_new(tr, json_pack("{s:i, s:I, s:I, s:I}", "rank", r, "pieces",
                                            (json_int_t)p->rank_npieces[r], "send_bytes_per_node", (json_int_t)b,
                                            "send_bytes_total", (json_int_t)(b * M)));
    }
    json_object_set_new(j, "trainer_ranks", tr);
    for (r = 0; r < o->local_ranks; r++)
        json_array_append_new(lr, json_pack("{s:i, s:I, s:I, s:I, s:I}", "local_rank", r, "chunks",
                                            (json_int_t)ls[r].chunks, "land_bytes", (json_int_t)ls[r].land,
                                            "copy_in_bytes", (json_int_t)ls[r].copy_in, "copied_out_bytes",
                                            (json_int_t)ls[r].copied_out));
    json_object_set_new(j, "engine_local_ranks", lr);
    json_object_set_new(j, "per_node",
                        json_pack("{s:I, s:I}", "network_bytes", (json_int_t)p->image_size,
                                  "intra_node_copy_bytes", (json_int_t)(p->image_size * (L - 1))));
    json_object_set_new(j, "total",
                        json_pack("{s:I, s:I}", "network_bytes", (json_int_t)(p->image_size * M),
                                  "intra_node_copy_bytes", (json_int_t)(p->image_size * (L - 1) * M)));
    json_object_set_new(j, "nodes", plan_nodes_json(pn));
    return j;
}

static void plan_print(const plan_opts_t *o, const wsync_manifest_t *m, const wsync_plan_t *p, const local_stat_t *ls)
{
    uint64_t M = (uint64_t)o->engines, L = (uint64_t)o->local_ranks;
    char a[64], b[64], c[64];
    int r;

    printf("model       %s, %zu tensors\n", o->file ? o->file : "synthetic", m->ntensors);
    printf("image       %s\n", both(p->image_size, a, sizeof(a)));
    printf("chunks      %u of %s\n", p->nchunks, wsync_fmt_size(p->chunk_size, a, sizeof(a)));
    printf("pieces      %zu\n", p->npieces);
    printf("topology    %d trainer rank%s (%s layout) -> %d engine node%s x %d local rank%s\n\n", o->trainers,
           o->trainers == 1 ? "" : "s", o->fsdp ? "fsdp" : "even", o->engines, o->engines == 1 ? "" : "s",
           o->local_ranks, o->local_ranks == 1 ? "" : "s");

    printf("%-12s %8s %30s %30s\n", "TRAINER RANK", "PIECES", "SENDS PER NODE", "SENDS IN TOTAL (x M)");
    for (r = 0; r < p->world; r++) {
        uint64_t s = wsync_plan_rank_send_bytes(p, r);
        printf("%-12d %8zu %30s %30s\n", r, p->rank_npieces[r], both(s, a, sizeof(a)), both(s * M, b, sizeof(b)));
    }
    printf("\n%-12s %8s %30s %30s %30s\n", "LOCAL RANK", "CHUNKS", "LANDS (NETWORK)", "COPIES FROM PEERS' WINDOWS",
           "COPIED BY PEERS");
    for (r = 0; r < o->local_ranks; r++)
        printf("%-12d %8u %30s %30s %30s\n", r, ls[r].chunks, both(ls[r].land, a, sizeof(a)),
               both(ls[r].copy_in, b, sizeof(b)), both(ls[r].copied_out, c, sizeof(c)));
    printf("\nper node    network in %s, intra-node copies %s\n", both(p->image_size, a, sizeof(a)),
           both(p->image_size * (L - 1), b, sizeof(b)));
    printf("all nodes   network in %s, intra-node copies %s\n", both(p->image_size * M, a, sizeof(a)),
           both(p->image_size * (L - 1) * M, b, sizeof(b)));
}

static void fill_predict(plan_opts_t *o, uint64_t image)
{
    o->pr.json = o->json;
    o->pr.trainers = o->trainers;
    o->pr.engines = o->engines;
    o->pr.local_ranks = o->local_ranks;
    o->pr.image = image;
    o->pr.chunk = o->chunk;
}

/* --predict without --tp needs only the image size: a synthetic size is
 * not built into a manifest, so it may be any size (a 1T model). */
static int predict_whole(plan_opts_t *o)
{
    wsync_safetensors_t *st = NULL;
    uint64_t size = 0;
    wsync_status_t s;
    int rc;
    if (o->synthetic) {
        s = wsync_parse_size(o->synthetic, "--synthetic", &size);
        if (s == WSYNC_OK && size == 0)
            s = wsync_error(WSYNC_ERR_INVALID, "--synthetic: the size must be above 0");
        if (s != WSYNC_OK) {
            cli_report("plan", "synthetic model", s);
            return 2;
        }
    } else {
        s = wsync_safetensors_open(o->file, &st);
        if (s != WSYNC_OK) {
            cli_report("plan", o->file, s);
            return s == WSYNC_ERR_NOMEM ? 1 : 2;
        }
        size = st->manifest->image_size;
    }
    fill_predict(o, size);
    rc = plan_predict_run(&o->pr);
    wsync_safetensors_close(st);
    return rc;
}

int cmd_plan(int argc, char **argv)
{
    plan_opts_t o;
    wsync_safetensors_t *st = NULL;
    wsync_manifest_t *synth = NULL;
    const wsync_manifest_t *m;
    wsync_layout_t *layout = NULL;
    wsync_plan_t *plan = NULL;
    local_stat_t *ls = NULL;
    plan_nodes_t *pn = NULL;
    wsync_status_t s;
    int rc = parse_opts(argc, argv, &o);

    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if ((o.pr.links || o.pr.scenarios || o.pr.trainer_hosts || o.pr.replica_gpus || o.pr.memory || o.pr.net ||
         o.pr.publish || o.pr.delta || o.pr.delta_density > 0 || o.pr.delta_width || o.pr.quant) &&
        !o.predict) {
        fprintf(stderr,
                "wsync plan: --links, --scenarios, --trainer-hosts, --replica-gpus, --memory, "
                "--transport, --publish, --delta* and --quant go with --predict\n%s",
                PLAN_USAGE);
        return 2;
    }
    if (o.predict && o.tp == NULL)
        return predict_whole(&o);
    if (o.synthetic) {
        uint64_t size;
        s = wsync_parse_size(o.synthetic, "--synthetic", &size);
        if (s == WSYNC_OK)
            s = wsync_manifest_synthetic(size, &synth);
        if (s != WSYNC_OK) {
            cli_report("plan", "synthetic model", s);
            return s == WSYNC_ERR_INVALID ? 2 : 1;
        }
        m = synth;
    } else {
        s = wsync_safetensors_open(o.file, &st);
        if (s != WSYNC_OK) {
            cli_report("plan", o.file, s);
            return s == WSYNC_ERR_FORMAT || s == WSYNC_ERR_INVALID || s == WSYNC_ERR_IO ? 2 : 1;
        }
        m = st->manifest;
    }
    s = o.fsdp ? wsync_layout_fsdp(m, o.trainers, &layout) : wsync_layout_even(m->image_size, o.trainers, &layout);
    if (s != WSYNC_OK) {
        cli_report("plan", "trainer layout", s);
        rc = 1;
        goto out;
    }
    s = wsync_plan_build(layout, o.chunk, &plan);
    if (s != WSYNC_OK) {
        cli_report("plan", "--chunk", s);
        rc = s == WSYNC_ERR_INVALID ? 2 : 1;
        goto out;
    }
    ls = calloc((size_t)o.local_ranks, sizeof(*ls));
    if (ls == NULL) {
        fprintf(stderr, "wsync plan: out of memory\n");
        rc = 1;
        goto out;
    }
    local_stats(plan, o.local_ranks, ls);
    rc = plan_nodes_build(o.tp, o.rules, m, layout, o.engines, o.local_ranks, o.chunk, &pn);
    if (rc != 0)
        goto out;
    if (o.predict) {
        plan_nodes_max(pn, &o.pr.tp_node, &o.pr.tp_land, &o.pr.tp_hold);
        fill_predict(&o, m->image_size);
        rc = plan_predict_run(&o.pr);
    } else if (o.json) {
        json_t *j = plan_json(&o, m, plan, ls, pn);
        char *text = json_dumps(j, JSON_INDENT(2));
        printf("%s\n", text ? text : "{}");
        free(text);
        json_decref(j);
    } else {
        plan_print(&o, m, plan, ls);
        if (o.tp != NULL)
            plan_nodes_print(pn);
    }
out:
    plan_nodes_free(pn);
    free(ls);
    wsync_plan_free(plan);
    wsync_layout_free(layout);
    wsync_manifest_free(synth);
    wsync_safetensors_close(st);
    return rc;
}
