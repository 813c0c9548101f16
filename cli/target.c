/* target.c: `wsync target`: what one engine rank of a TP group holds: its
 * destination tensors (name, dtype, shape, offset in the rank's memory,
 * bytes) by the rules, or the target JSON (docs/TARGETS.md). Pure; reads only
 * the safetensors header. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model.h"
#include "common/targets/rules.h"
#include "common/base/util.h"

#define TARGET_USAGE                                                                                          \
    "usage: wsync target (FILE.safetensors | --synthetic SIZE) [--tp T] [--rank K] [--rules FILE] [--json]\n" \
    "                    [--write OUT.safetensors]\n"

static void print_target(const wsync_target_t *t, int tp, int rank)
{
    char sz[32], held[32], shape[256];
    size_t i;
    int d;
    printf("%-56s %-8s %-24s %14s %14s\n", "DESTINATION", "DTYPE", "SHAPE", "OFFSET", "BYTES");
    for (i = 0; i < t->ndests; i++) {
        const wsync_dest_t *ds = &t->dests[i];
        int n = snprintf(shape, sizeof(shape), "[");
        for (d = 0; d < ds->ndim && n < (int)sizeof(shape) - 24; d++)
            n += snprintf(shape + n, sizeof(shape) - (size_t)n, "%s%lld", d ? ", " : "", (long long)ds->shape[d]);
        snprintf(shape + n, sizeof(shape) - (size_t)n, "]");
        printf("%-56s %-8s %-24s %14llu %14llu\n", ds->name, wsync_dtype_name(ds->dtype), shape,
               (unsigned long long)ds->offset, (unsigned long long)ds->size);
    }
    printf("TP rank %d of %d: %zu destination tensors, image %s (%llu bytes), holds %s (%llu bytes) from the "
           "trainer, target %s\n",
           rank, tp, t->ndests, wsync_fmt_size(t->image_size, sz, sizeof(sz)), (unsigned long long)t->image_size,
           wsync_fmt_size(t->covered_bytes, held, sizeof(held)), (unsigned long long)t->covered_bytes,
           t->digest_hex);
}

/* --write: the rank's destination tensors as the engine holds them (FP8
 * quantized, with scales), computed on the host from the model's bytes. */
static int write_target(const cli_model_t *model, const wsync_target_t *t, const char *out)
{
    unsigned char *src = malloc(model->manifest->image_size + 1), *dst = malloc(t->image_size + 1);
    wsync_st_tensor_t *ts = calloc(t->ndests + 1, sizeof(*ts));
    wsync_status_t s = WSYNC_ERR_NOMEM;
    size_t i;

    if (src && dst && ts && (s = cli_model_fill(model, 0, src, 0, model->manifest->image_size)) == WSYNC_OK &&
        (s = wsync_target_fill_host(t, model->manifest, src, dst)) == WSYNC_OK) {
        for (i = 0; i < t->ndests; i++)
            ts[i] = (wsync_st_tensor_t){t->dests[i].name, t->dests[i].dtype, t->dests[i].ndim, t->dests[i].shape,
                                        dst + t->dests[i].offset};
        s = wsync_safetensors_write_tensors(out, t->ndests, ts, NULL);
    }
    if (s != WSYNC_OK)
        cli_report("target", s == WSYNC_ERR_NOMEM ? "--write (out of memory)" : "--write", s);
    free(src);
    free(dst);
    free(ts);
    return s == WSYNC_OK ? 0 : s == WSYNC_ERR_IO || s == WSYNC_ERR_NOMEM ? 1 : 2;
}

int cmd_target(int argc, char **argv)
{
    static const struct option opts[] = {{"synthetic", 1, 0, 's'}, {"tp", 1, 0, 't'},   {"rank", 1, 0, 'k'},
                                         {"rules", 1, 0, 'r'},     {"json", 0, 0, 'j'}, {"help", 0, 0, 'h'},
                                         {"write", 1, 0, 'w'},     {0, 0, 0, 0}};
    const char *synthetic = NULL, *rules_path = NULL, *file = NULL, *write = NULL;
    cli_model_t model = {0};
    wsync_rules_t *rules = NULL;
    wsync_target_t *t = NULL;
    wsync_status_t s;
    int c, tp = 1, rank = 0, json = 0, rc = 0;

    optind = 1;
    opterr = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 's': synthetic = optarg; break;
        case 't':
            if (cli_parse_int("target", "--tp", optarg, 1, 4096, &tp))
                return 2;
            break;
        case 'k':
            if (cli_parse_int("target", "--rank", optarg, 0, 4095, &rank))
                return 2;
            break;
        case 'r': rules_path = optarg; break;
        case 'j': json = 1; break;
        case 'w': write = optarg; break;
        case 'h':
            printf(TARGET_USAGE
                   "Prints what TP rank K of a group of T engine ranks holds: each destination tensor (name,\n"
                   "dtype, shape, offset in the rank's memory, bytes), made by the built-in vLLM rules or\n"
                   "those of --rules FILE (configs/rules/*.json); --json prints the target JSON\n"
                   "(docs/TARGETS.md); --write OUT writes the rank's destination tensors as the engine holds\n"
                   "them after a sync (FP8 destinations quantized, with their scales: docs/FP8.md) as a\n"
                   "safetensors file. Defaults: --tp 1 --rank 0.\n");
            return 0;
        default: fprintf(stderr, TARGET_USAGE); return 2;
        }
    }
    if (optind < argc - 1) {
        fprintf(stderr, "wsync target: one model file expected, got '%s' and '%s'\n%s", argv[optind],
                argv[optind + 1], TARGET_USAGE);
        return 2;
    }
    if (optind == argc - 1)
        file = argv[optind];
    if ((file == NULL) == (synthetic == NULL)) {
        fprintf(stderr, "wsync target: give either a safetensors file or --synthetic SIZE, %s\n%s",
                file ? "not both" : "none was given", TARGET_USAGE);
        return 2;
    }
    if (rank >= tp) {
        fprintf(stderr, "wsync target: --rank %d is not a rank of a TP group of %d (0 to %d)\n", rank, tp, tp - 1);
        return 2;
    }
    s = cli_model_open(synthetic, file, &model);
    if (s != WSYNC_OK) {
        cli_report("target", file ? file : "synthetic model", s);
        return s == WSYNC_ERR_IO || s == WSYNC_ERR_NOMEM ? 1 : 2;
    }
    if (rules_path != NULL && (s = wsync_rules_load(rules_path, &rules)) != WSYNC_OK) {
        cli_report("target", "--rules", s);
        rc = s == WSYNC_ERR_IO ? 1 : 2;
        goto out;
    }
    s = wsync_target_from_rules(model.manifest, rules, tp, rank, &t);
    if (s != WSYNC_OK) {
        cli_report("target", "rules", s);
        rc = s == WSYNC_ERR_NOMEM ? 1 : 2;
        goto out;
    }
    if (write != NULL) {
        rc = write_target(&model, t, write);
        if (rc != 0)
            goto out;
    }
    if (json) {
        json_t *j = NULL;
        char *text = NULL;
        if (wsync_target_to_json(t, model.manifest, &j) == WSYNC_OK)
            text = json_dumps(j, JSON_INDENT(2));
        json_decref(j);
        if (text == NULL) {
            fprintf(stderr, "wsync target: out of memory printing the target\n");
            rc = 1;
            goto out;
        }
        printf("%s\n", text);
        free(text);
    } else {
        print_target(t, tp, rank);
    }
out:
    wsync_target_free(t);
    wsync_rules_free(rules);
    cli_model_close(&model);
    return rc;
}
