/* tp_rules.h: vLLM's TP=N slicing of a Qwen2-style tensor list (fused
 * qkv_proj and gate_up_proj split by rows, o_proj and down_proj by columns,
 * the vocabulary padded to 64 and split by rows, the rest replicated),
 * written again here from docs/ENGINE_LAYOUTS.md, independent of
 * common/targets: tp_e2e_bench compares what wsync lands with it. */
#ifndef WSYNC_BENCH_TP_RULES_H
#define WSYNC_BENCH_TP_RULES_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/model/manifest.h"

/* One block of a destination tensor: `height` rows of `width` bytes from
 * source tensor `src` (starting `col` bytes into each row of `spitch` bytes),
 * back to back at dst_off of the destination tensor. */
typedef struct block {
    long src;
    uint64_t col, spitch, width, height, dst_off;
} block_t;

typedef struct dest {
    char name[160];
    uint64_t nbytes;
    int n;
    block_t b[3];
} dest_t;

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* The tensor named like `name` with `from` (its last occurrence) swapped for `to`. */
static long sibling(const wsync_manifest_t *M, const char *name, const char *from, const char *to)
{
    char buf[160];
    const char *at = strstr(name, from);
    if (at == NULL)
        return -1;
    snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(at - name), name, to, at + strlen(from));
    return wsync_manifest_find(M, buf);
}

static void rename_to(dest_t *d, const char *name, const char *from, const char *to)
{
    const char *at = strstr(name, from);
    snprintf(d->name, sizeof(d->name), "%.*s%s%s", (int)(at - name), name, to, at + strlen(from));
}

/* Rank k's chunk of dim 0 of tensor t, appended to d. */
static void add_rows(const wsync_manifest_t *M, dest_t *d, long t, int k, int tp)
{
    const wsync_tensor_t *x = &M->tensors[t];
    uint64_t rb = x->size / (uint64_t)x->shape[0], rows = (uint64_t)x->shape[0] / (uint64_t)tp;
    d->b[d->n++] = (block_t){.src = t,
                             .col = (uint64_t)k * rows * rb,
                             .spitch = rows * rb,
                             .width = rows * rb,
                             .height = 1,
                             .dst_off = d->nbytes};
    d->nbytes += rows * rb;
}

/* Destination tensors of TP rank k, in manifest order of their first source. */
static int rank_dests(const wsync_manifest_t *M, int k, int tp, dest_t *out, int max)
{
    size_t i;
    int n = 0;
    for (i = 0; i < M->ntensors; i++) {
        const wsync_tensor_t *x = &M->tensors[i];
        const char *nm = x->name;
        dest_t *d = &out[n];
        memset(d, 0, sizeof(*d));
        if (strstr(nm, "self_attn.k_proj.") || strstr(nm, "self_attn.v_proj.") || strstr(nm, "mlp.up_proj."))
            continue; /* taken with q_proj / gate_proj */
        if (strstr(nm, "self_attn.q_proj.")) {
            rename_to(d, nm, "q_proj", "qkv_proj");
            add_rows(M, d, (long)i, k, tp);
            add_rows(M, d, sibling(M, nm, "q_proj", "k_proj"), k, tp);
            add_rows(M, d, sibling(M, nm, "q_proj", "v_proj"), k, tp);
        } else if (ends_with(nm, "mlp.gate_proj.weight")) {
            rename_to(d, nm, "gate_proj", "gate_up_proj");
            add_rows(M, d, (long)i, k, tp);
            add_rows(M, d, sibling(M, nm, "gate_proj", "up_proj"), k, tp);
        } else if (ends_with(nm, "self_attn.o_proj.weight") || ends_with(nm, "mlp.down_proj.weight")) {
            uint64_t rb = x->size / (uint64_t)x->shape[0], w = rb / (uint64_t)tp;
            snprintf(d->name, sizeof(d->name), "%s", nm);
            d->b[d->n++] = (block_t){.src = (long)i,
                                     .col = (uint64_t)k * w,
                                     .spitch = rb,
                                     .width = w,
                                     .height = (uint64_t)x->shape[0]};
            d->nbytes = w * (uint64_t)x->shape[0];
        } else if (strcmp(nm, "model.embed_tokens.weight") == 0 || strcmp(nm, "lm_head.weight") == 0) {
            uint64_t v = (uint64_t)x->shape[0], rb = x->size / v, vp = (v + 63) / 64 * 64, per = vp / (uint64_t)tp;
            uint64_t lo = (uint64_t)k * per, hi = lo + per < v ? lo + per : v;
            snprintf(d->name, sizeof(d->name), "%s", nm);
            if (hi > lo)
                d->b[d->n++] = (block_t){.src = (long)i,
                                         .col = lo * rb,
                                         .spitch = (hi - lo) * rb,
                                         .width = (hi - lo) * rb,
                                         .height = 1};
            d->nbytes = per * rb; /* rows >= V stay zero */
        } else {
            snprintf(d->name, sizeof(d->name), "%s", nm);
            d->b[d->n++] = (block_t){.src = (long)i, .spitch = x->size, .width = x->size, .height = 1};
            d->nbytes = x->size;
        }
        if (++n == max)
            break;
    }
    return n;
}

/* The n destination tensors d sliced out of a whole image `img` into dst[i]
 * (the baseline: an engine that pulls the whole image and slices it), each
 * 2-D block by copy2d(dst, src, spitch, width, height). */
static void slice_image(const wsync_manifest_t *M, const dest_t *d, int n, const char *img, char **dst,
                        void (*copy2d)(void *, const void *, uint64_t, uint64_t, uint64_t))
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < d[i].n; j++) {
            const block_t *b = &d[i].b[j];
            copy2d(dst[i] + b->dst_off, img + M->tensors[b->src].offset + b->col, b->spitch, b->width, b->height);
        }
}

#endif
