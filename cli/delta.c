/* delta.c: `wsync delta stats OLD NEW`: what sending NEW as a delta from OLD
 * would cost, per tensor and in all: the fraction of elements that changed,
 * the bytes of each wire form (common/delta/delta.h) and the chosen one
 * against full. The totals are given twice: per tensor (each in its own
 * dtype's width) and as the pieces the wire carries (the image cut into
 * --chunk slices, a piece's width its tensors' one width, or bytes). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/delta.h"
#include "common/base/util.h"
#include "common/delta/delta.h"
#include "common/model/safetensors.h"

/* Bytes per element the delta compares for a dtype: its own width when
 * whole bytes (1, 2, 4, 8), bytes otherwise (F4, F6, complex). */
static unsigned dtype_width(wsync_dtype_t d)
{
    unsigned bits = wsync_dtype_bits(d);
    return bits == 8 || bits == 16 || bits == 32 || bits == 64 ? bits / 8 : 1;
}

typedef struct totals {
    uint64_t elems, changed, full, chosen, bytes[3];
} totals_t;

static void add(totals_t *t, const wsync_delta_stats_t *st)
{
    t->elems += st->elems;
    t->changed += st->changed;
    t->full += st->elems * st->width;
    t->chosen += st->bytes[st->chosen];
    for (int f = 0; f < 3; f++)
        t->bytes[f] += st->bytes[f];
}

static void print_totals(const char *what, const totals_t *t)
{
    printf("%-44s %8.4f%% %14llu %14llu %14llu %-6s %8.4f\n", what,
           t->elems ? 100.0 * (double)t->changed / (double)t->elems : 0.0, (unsigned long long)t->bytes[0],
           (unsigned long long)t->bytes[1], (unsigned long long)t->bytes[2], "",
           t->full ? (double)t->chosen / (double)t->full : 0.0);
}

unsigned cli_delta_piece_width(const wsync_manifest_t *m, uint64_t off, uint64_t end)
{
    unsigned w = 0;
    for (size_t i = 0; i < m->ntensors; i++) {
        const wsync_tensor_t *t = &m->tensors[i];
        if (t->offset + t->size <= off || t->offset >= end || t->size == 0)
            continue;
        if (w != 0 && dtype_width(t->dtype) != w)
            return 1;
        w = dtype_width(t->dtype);
    }
    return wsync_delta_width_for(end - off, w ? w : 1);
}

static int pieces_totals(const wsync_safetensors_t *a, const wsync_safetensors_t *b, uint64_t chunk, totals_t *t)
{
    const wsync_manifest_t *m = a->manifest;
    unsigned char *ia = calloc(1, m->image_size ? m->image_size : 1),
                  *ib = calloc(1, m->image_size ? m->image_size : 1);
    int rc = 1;
    if (ia == NULL || ib == NULL) {
        fprintf(stderr, "wsync delta stats: out of memory for two images of %llu bytes\n",
                (unsigned long long)m->image_size);
        goto out;
    }
    if (wsync_safetensors_copy_to_image(a, ia) != WSYNC_OK || wsync_safetensors_copy_to_image(b, ib) != WSYNC_OK) {
        cli_report("delta stats", "building the images", WSYNC_ERR_INTERNAL);
        goto out;
    }
    for (uint64_t off = 0; off < m->image_size; off += chunk) {
        uint64_t end = off + chunk < m->image_size ? off + chunk : m->image_size;
        wsync_delta_stats_t st;
        unsigned w = cli_delta_piece_width(m, off, end);
        if (wsync_delta_count(ia + off, ib + off, end - off, w, &st) != WSYNC_OK)
            goto out;
        add(t, &st);
    }
    rc = 0;
out:
    free(ia);
    free(ib);
    return rc;
}

static int usage(FILE *f)
{
    fprintf(f, "usage: wsync delta stats [--quiet] [--chunk BYTES] OLD.safetensors NEW.safetensors\n"
               "       wsync delta encode [--chunk SIZE] OLD.safetensors NEW.safetensors OUT.wire\n"
               "       wsync delta apply [--chunk SIZE] OLD.safetensors WIRES OUT.safetensors\n"
               "Prints, per tensor and in all, the fraction of elements of NEW that differ from OLD, the bytes\n"
               "of each delta form (full, bitmap, pairs; header included), the chosen form and its size\n"
               "against full. The last line costs the image as the wire's pieces (--chunk, default 64 MiB).\n"
               "--quiet prints the totals only.\n");
    return f == stdout ? 0 : 2;
}

static int stats(int argc, char **argv)
{
    static const struct option opts[] = {{"quiet", 0, 0, 'q'},
                                         {"chunk", 1, 0, 'c'},
                                         {"help", 0, 0, 'h'},
                                         {0, 0, 0, 0}};
    wsync_safetensors_t *a = NULL, *b = NULL;
    char da[33], db[33];
    uint64_t chunk = 64ull << 20;
    totals_t tt = {0}, tp = {0};
    int o, quiet = 0, rc = 2;

    optind = 1;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (o == 'q')
            quiet = 1;
        else if (o == 'c' && wsync_parse_size(optarg, "--chunk", &chunk) == WSYNC_OK && chunk > 0)
            continue;
        else
            return usage(o == 'h' ? stdout : stderr);
    }
    if (optind != argc - 2)
        return usage(stderr);
    if (wsync_safetensors_open(argv[optind], &a) != WSYNC_OK ||
        wsync_safetensors_open(argv[optind + 1], &b) != WSYNC_OK) {
        fprintf(stderr, "wsync delta stats: %s\n", wsync_last_error());
        goto out;
    }
    wsync_manifest_digest(a->manifest, da);
    wsync_manifest_digest(b->manifest, db);
    if (strcmp(da, db) != 0) {
        fprintf(stderr,
                "wsync delta stats: %s and %s hold different layouts (manifest digests %s and %s): a delta "
                "needs the same tensors, dtypes and shapes in both\n",
                argv[optind], argv[optind + 1], da, db);
        goto out;
    }
    if (!quiet)
        printf("%-44s %9s %14s %14s %14s %-6s %8s\n", "TENSOR", "CHANGED", "FULL", "BITMAP", "PAIRS", "CHOSEN",
               "/FULL");
    for (size_t i = 0; i < a->manifest->ntensors; i++) {
        const wsync_tensor_t *t = &a->manifest->tensors[i];
        unsigned w = wsync_delta_width_for(t->size, dtype_width(t->dtype));
        wsync_delta_stats_t st;
        if (wsync_delta_count(a->data[i], b->data[i], t->size, w, &st) != WSYNC_OK) {
            cli_report("delta stats", t->name, WSYNC_ERR_INTERNAL);
            rc = 1;
            goto out;
        }
        add(&tt, &st);
        if (!quiet)
            printf("%-44.44s %8.4f%% %14llu %14llu %14llu %-6s %8.4f\n", t->name,
                   st.elems ? 100.0 * (double)st.changed / (double)st.elems : 0.0, (unsigned long long)st.bytes[0],
                   (unsigned long long)st.bytes[1], (unsigned long long)st.bytes[2],
                   wsync_delta_form_name(st.chosen),
                   st.elems ? (double)st.bytes[st.chosen] / (double)(st.elems * st.width) : 0.0);
    }
    print_totals("total (per tensor)", &tt);
    rc = pieces_totals(a, b, chunk, &tp);
    if (rc == 0) {
        char what[64];
        snprintf(what, sizeof(what), "total (%llu-byte pieces)", (unsigned long long)chunk);
        print_totals(what, &tp);
    }
out:
    wsync_safetensors_close(a);
    wsync_safetensors_close(b);
    return rc;
}

int cmd_delta(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "stats") == 0)
        return stats(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "encode") == 0)
        return cli_delta_encode(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "apply") == 0)
        return cli_delta_apply(argc - 1, argv + 1);
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
        return usage(stdout);
    return usage(stderr);
}
