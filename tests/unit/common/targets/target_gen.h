/* target_gen.h: random models, trainer layouts and targets for the target
 * and plan tests, and the element-by-element evaluation of a target that the
 * tests compare the plan with (it reads the target's blocks, never its runs). */
#ifndef WSYNC_TESTS_TARGET_GEN_H
#define WSYNC_TESTS_TARGET_GEN_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/model/manifest.h"
#include "common/model/plan.h"
#include "common/targets/rules.h"
#include "common/targets/target.h"

static uint64_t gen_state_ = 88172645463325252ULL;

static __attribute__((unused)) uint64_t rnd(void)
{
    gen_state_ ^= gen_state_ << 13;
    gen_state_ ^= gen_state_ >> 7;
    gen_state_ ^= gen_state_ << 17;
    return gen_state_;
}

/* Uniform in [lo, hi]. */
static __attribute__((unused)) int64_t rr(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

static const wsync_dtype_t gen_dtypes[] = {WSYNC_DTYPE_U8, WSYNC_DTYPE_BF16, WSYNC_DTYPE_F32, WSYNC_DTYPE_I64};

/* A random model: a few tensors of 0 to 3 dimensions. */
static __attribute__((unused)) wsync_manifest_t *gen_random_model(void)
{
    wsync_manifest_t *m;
    int n = (int)rr(1, 10), i, k;
    if (wsync_manifest_create(&m) != WSYNC_OK)
        return NULL;
    for (i = 0; i < n; i++) {
        int64_t shape[3];
        int nd = (int)rr(0, 3);
        char name[32];
        for (k = 0; k < nd; k++)
            shape[k] = rr(1, nd == 1 ? 300 : 24);
        snprintf(name, sizeof(name), "t%d", i);
        if (wsync_manifest_add(m, name, gen_dtypes[rr(0, 3)], nd, shape) != WSYNC_OK) {
            wsync_manifest_free(m);
            return NULL;
        }
    }
    return m;
}

static __attribute__((unused)) int add_t(wsync_manifest_t *m, const char *name, int nd, int64_t a, int64_t b)
{
    int64_t s[2] = {a, b};
    return wsync_manifest_add(m, name, WSYNC_DTYPE_BF16, nd, s) == WSYNC_OK ? 0 : -1;
}

/* A small Llama/Qwen-shaped model whose dimensions divide by T (vocabulary
 * not a multiple of 64, its padded size divisible by T); MoE layers with E
 * experts when moe. */
static __attribute__((unused)) wsync_manifest_t *gen_llm_model(int T, int moe)
{
    wsync_manifest_t *m;
    int64_t H = T * rr(1, 3) * 2, hd = rr(1, 3) * 2, nh = T * rr(1, 2), nkv = T, I = T * rr(1, 3);
    int64_t V = rr(20, 300), E = T * rr(1, 2);
    int layers = (int)rr(1, 3), l, e, rc = 0;
    char n[128];
    while (((V + 63) / 64 * 64) % T || V % 64 == 0)
        V++;
    if (wsync_manifest_create(&m) != WSYNC_OK)
        return NULL;
    rc |= add_t(m, "model.embed_tokens.weight", 2, V, H);
    for (l = 0; l < layers; l++) {
#define L_(fmt, nd, a, b)                                  \
    do {                                                   \
        snprintf(n, sizeof(n), "model.layers.%d." fmt, l); \
        rc |= add_t(m, n, nd, a, b);                       \
    } while (0)
        L_("input_layernorm.weight", 1, H, 0);
        L_("self_attn.q_proj.weight", 2, nh * hd, H);
        L_("self_attn.q_proj.bias", 1, nh * hd, 0);
        L_("self_attn.k_proj.weight", 2, nkv * hd, H);
        L_("self_attn.k_proj.bias", 1, nkv * hd, 0);
        L_("self_attn.v_proj.weight", 2, nkv * hd, H);
        L_("self_attn.v_proj.bias", 1, nkv * hd, 0);
        L_("self_attn.o_proj.weight", 2, H, nh * hd);
        L_("post_attention_layernorm.weight", 1, H, 0);
        if (moe) {
            L_("mlp.gate.weight", 2, E, H);
            for (e = 0; e < E; e++) {
                snprintf(n, sizeof(n), "model.layers.%d.mlp.experts.%d.gate_proj.weight", l, e);
                rc |= add_t(m, n, 2, I, H);
                snprintf(n, sizeof(n), "model.layers.%d.mlp.experts.%d.up_proj.weight", l, e);
                rc |= add_t(m, n, 2, I, H);
                snprintf(n, sizeof(n), "model.layers.%d.mlp.experts.%d.down_proj.weight", l, e);
                rc |= add_t(m, n, 2, H, I);
            }
        } else {
            L_("mlp.gate_proj.weight", 2, I, H);
            L_("mlp.up_proj.weight", 2, I, H);
            L_("mlp.down_proj.weight", 2, H, I);
        }
#undef L_
    }
    rc |= add_t(m, "model.norm.weight", 1, H, 0);
    rc |= add_t(m, "lm_head.weight", 2, V, H);
    if (rc) {
        wsync_manifest_free(m);
        return NULL;
    }
    return m;
}

/* Random block copies: destinations stacking 1-3 boxes of random sources
 * (of its dtype) along a leading dimension, each box somewhere inside a
 * larger destination box; sources may repeat (a rank holding bytes twice). */
static __attribute__((unused)) wsync_target_t *gen_random_target(const wsync_manifest_t *m)
{
    wsync_target_t *t;
    int nd = (int)rr(1, 5), d, k, i;
    if (wsync_target_create(&t) != WSYNC_OK)
        return NULL;
    for (d = 0; d < nd; d++) {
        const wsync_tensor_t *s0 = &m->tensors[rr(0, (int64_t)m->ntensors - 1)];
        wsync_block_t bl[3];
        int nb = (int)rr(1, 3), nsrc = 0, lead = (int)rr(nb > 1 ? 1 : 0, 2), ndim;
        int64_t shape[WSYNC_MAX_DIMS] = {0};
        char name[32];
        if (s0->size == 0)
            continue;
        for (i = 0; i < nb; i++) {
            /* Another source of the same dtype and rank, or s0 again. */
            const wsync_tensor_t *s = s0;
            long si = (long)(s0 - m->tensors);
            int tries;
            for (tries = 0; tries < 4; tries++) {
                long c = (long)rr(0, (int64_t)m->ntensors - 1);
                if (m->tensors[c].dtype == s0->dtype && m->tensors[c].ndim == s0->ndim && m->tensors[c].size > 0) {
                    si = c;
                    s = &m->tensors[c];
                    break;
                }
            }
            memset(&bl[nsrc], 0, sizeof(bl[0]));
            bl[nsrc].src = (uint32_t)si;
            for (k = 0; k < s->ndim; k++) {
                int64_t a = rr(0, s->shape[k] - 1), b = rr(a + 1, s->shape[k]);
                bl[nsrc].src_start[k] = a;
                bl[nsrc].src_stop[k] = b;
            }
            nsrc++;
        }
        ndim = s0->ndim + lead;
        for (k = 0; k < lead; k++)
            shape[k] = k == 0 ? nb + rr(0, 1) : rr(1, 2);
        for (k = 0; k < s0->ndim; k++) {
            int64_t mx = 0;
            for (i = 0; i < nsrc; i++)
                if (bl[i].src_stop[k] - bl[i].src_start[k] > mx)
                    mx = bl[i].src_stop[k] - bl[i].src_start[k];
            shape[lead + k] = mx + rr(0, 1) * rr(0, 3);
        }
        if (lead == 0)
            nsrc = 1; /* one box when nothing stacks them */
        snprintf(name, sizeof(name), "d%d", d);
        if (wsync_target_add_dest(t, name, s0->dtype, ndim, shape) != WSYNC_OK)
            goto fail;
        for (i = 0; i < nsrc; i++) {
            for (k = 0; k < lead; k++)
                bl[i].dst_start[k] = k == 0 ? i : rr(0, shape[k] - 1);
            for (k = 0; k < s0->ndim; k++)
                bl[i].dst_start[lead + k] = rr(0, shape[lead + k] - (bl[i].src_stop[k] - bl[i].src_start[k]));
            if (wsync_target_add_block(t, &bl[i]) != WSYNC_OK)
                goto fail;
        }
    }
    if (wsync_target_finish(t, m) != WSYNC_OK) {
        fprintf(stderr, "  gen_random_target: %s\n", wsync_last_error());
        goto fail;
    }
    return t;
fail:
    wsync_target_free(t);
    return NULL;
}

/* exp[dst byte] = source image offset + 1 (0: no block writes it), element
 * by element from the target's blocks. */
static __attribute__((unused)) void eval_target(const wsync_manifest_t *m, const wsync_target_t *t, uint32_t *exp)
{
    size_t d, b;
    memset(exp, 0, t->image_size * sizeof(*exp));
    if (t->whole_image) {
        uint64_t o;
        for (o = 0; o < m->image_size; o++)
            exp[o] = (uint32_t)o + 1;
        return;
    }
    for (d = 0; d < t->ndests; d++) {
        const wsync_dest_t *ds = &t->dests[d];
        for (b = 0; b < ds->nblocks; b++) {
            const wsync_block_t *bl = &t->blocks[ds->first_block + b];
            const wsync_tensor_t *s = &m->tensors[bl->src];
            int lead = ds->ndim - s->ndim, k;
            uint64_t es = wsync_dtype_bits(s->dtype) / 8, idx[WSYNC_MAX_DIMS] = {0};
            for (;;) {
                uint64_t so = 0, dof = 0, e;
                for (k = 0; k < s->ndim; k++)
                    so = so * (uint64_t)s->shape[k] + (uint64_t)bl->src_start[k] + idx[k];
                for (k = 0; k < ds->ndim; k++)
                    dof = dof * (uint64_t)ds->shape[k] + (uint64_t)bl->dst_start[k] +
                          (k >= lead ? idx[k - lead] : 0);
                for (e = 0; e < es; e++)
                    exp[ds->offset + dof * es + e] = (uint32_t)(s->offset + so * es + e) + 1;
                for (k = s->ndim - 1; k >= 0; k--) {
                    if (++idx[k] < (uint64_t)(bl->src_stop[k] - bl->src_start[k]))
                        break;
                    idx[k] = 0;
                }
                if (k < 0)
                    break;
            }
        }
    }
}

/* A random trainer layout of m: even, fsdp or explicit (*kind 0, 1, 2). */
static __attribute__((unused)) wsync_layout_t *gen_layout(const wsync_manifest_t *m, int *kind)
{
    wsync_layout_t *l = NULL;
    int W = (int)rr(1, 6);
    *kind = (int)rr(0, 2);
    if (*kind == 0) {
        wsync_layout_even(m->image_size, W, &l);
    } else if (*kind == 1) {
        wsync_layout_fsdp(m, W, &l);
    } else {
        /* Explicit: the image cut at random byte offsets, pieces to random ranks. */
        size_t n[6] = {0}, cap = 64;
        wsync_extent_t *e[6];
        uint64_t pos = 0;
        int r;
        for (r = 0; r < W; r++)
            e[r] = calloc(cap, sizeof(wsync_extent_t));
        while (pos < m->image_size) {
            uint64_t len = (uint64_t)rr(1, (int64_t)(m->image_size / 4 + 1));
            if (pos + len > m->image_size)
                len = m->image_size - pos;
            r = (int)rr(0, W - 1);
            if (n[r] < cap)
                e[r][n[r]++] = (wsync_extent_t){pos, len};
            else
                e[r][n[r] - 1].len += 0; /* never: cap is far above the cuts made */
            pos += len;
        }
        wsync_layout_explicit(m->image_size, W, n, (const wsync_extent_t *const *)e, &l);
        for (r = 0; r < W; r++)
            free(e[r]);
    }
    return l;
}

#endif
