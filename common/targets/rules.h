/* rules.h: rules that turn a manifest into the target of one rank of a
 * tensor-parallel group of T ranks. Built in (vLLM's names and conventions for
 * Llama/Qwen-family models, MoE experts included) and as data
 * (configs/rules/vllm.json holds the same rules); the syntax is documented in
 * docs/TARGETS.md.
 *
 * A rule matches source tensor names with a pattern: `*` matches any
 * non-empty text (at most one per pattern), `{e}` a decimal expert index,
 * `{a,b,c}` one of the listed words (the order of the list is the order the
 * parts are concatenated in). `into` names the destination: the pattern's `*`
 * is substituted, the other groups are dropped; without `into` the
 * destination keeps the source name. The first rule that matches a tensor
 * applies; a tensor no rule matches is replicated.
 *
 * Splits (chunk K of n = rows [K*n/T, (K+1)*n/T); a dimension that does not
 * divide is refused, naming the tensor):
 *   replicate  the whole tensor;
 *   rows       chunk K of dim 0 of each part, concatenated along dim 0 in the
 *              order of the pattern's {..} list (qkv_proj, gate_up_proj);
 *   cols       chunk K of dim 1 (row-parallel: o_proj, down_proj);
 *   vocab      dim 0 padded up to a multiple of `pad`, rank K holds rows
 *              [K*Vp/T, (K+1)*Vp/T) of the padded matrix, rows >= V zero;
 *   experts    E experts (indices 0..E-1, all present), rank K holds experts
 *              [K*E/T, (K+1)*E/T) stacked into [E/T, sum of the parts' dim 0,
 *              rest...]: per local expert its parts in list order (w13_weight
 *              = gate rows then up rows; w2_weight = down).
 *
 * A rule with "quant" (wsync_rule_fp8_t) makes its destination FP8 with a
 * scale tensor (target.h, wsync_target_set_fp8), whatever its split: a
 * slice that cuts a quantization block is refused, naming the tensor, the
 * dimension and the block. */
#ifndef WSYNC_COMMON_RULES_H
#define WSYNC_COMMON_RULES_H

#include <stddef.h>

#include "common/model/manifest.h"
#include "common/targets/target.h"

typedef enum wsync_split {
    WSYNC_SPLIT_REPLICATE,
    WSYNC_SPLIT_ROWS,
    WSYNC_SPLIT_COLS,
    WSYNC_SPLIT_VOCAB,
    WSYNC_SPLIT_EXPERTS,
} wsync_split_t;

/* A rule's FP8 request (docs/FP8.md): its destination is F8_E4M3,
 * quantized by `spec`, with a scale tensor named by `scale` (its '*' is the
 * destination's name; "*_scale_inv" by default). */
typedef struct wsync_rule_fp8 {
    wsync_fp8_spec_t spec;
    const char *scale;
} wsync_rule_fp8_t;

typedef struct wsync_rule {
    const char *match; /* pattern over source names */
    const char *into;  /* destination name pattern, or NULL: the source's name */
    wsync_split_t split;
    int pad;                     /* vocab: pad dim 0 to a multiple of this (>= 1) */
    const wsync_rule_fp8_t *fp8; /* NULL: the source's dtype */
} wsync_rule_t;

typedef struct wsync_rules {
    size_t nrules;
    const wsync_rule_t *rules;
    void *owned_; /* private to rules.c: storage of parsed rules */
} wsync_rules_t;

/* The built-in rules (static; never freed). */
const wsync_rules_t *wsync_rules_builtin(void);

/* Rules from their JSON form ({"version":1,"rules":[{"match","into","split","pad","quant"}...]}):
 * the error names the rule (index and pattern) and what is wrong. */
wsync_status_t wsync_rules_from_json(const char *json, size_t len, wsync_rules_t **out);
/* Reads and parses a rules file; the error names the file. */
wsync_status_t wsync_rules_load(const char *path, wsync_rules_t **out);
void wsync_rules_free(wsync_rules_t *r);

/* Name of a split ("rows"), and parsing one; -1 for an unknown name. */
const char *wsync_split_name(wsync_split_t s);
int wsync_split_parse(const char *name, wsync_split_t *out);

/* The target of TP rank `tp_rank` of `tp_size` from the rules (NULL: the
 * built-in rules). Destinations come in the order of their first source
 * tensor in the manifest. Refuses, naming the tensor, when a dimension does
 * not divide by tp_size, a fused part is missing or its shape disagrees. */
wsync_status_t wsync_target_from_rules(const wsync_manifest_t *m, const wsync_rules_t *rules, int tp_size,
                                       int tp_rank, wsync_target_t **out);

#endif
