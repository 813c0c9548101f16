/* plan_predict.h: `wsync plan --predict`: one version's time per candidate
 * plan on a links file (common/cost/cost.h), with the breakdown, and the
 * choice; `--scenarios` costs the reference scenarios instead
 * (docs/COST_MODEL.md). */
#ifndef WSYNC_CLI_PLAN_PREDICT_H
#define WSYNC_CLI_PLAN_PREDICT_H

#include <stdint.h>

typedef struct plan_predict_opts {
    const char *links; /* NULL: the `links` setting */
    int scenarios;     /* cost the reference scenarios */
    int json;
    int trainers, engines, local_ranks;
    int trainer_hosts;   /* 0: from the links file's GPUs per host */
    int replica_gpus;    /* 0: every rank holds the whole image (or its --tp target) */
    const char *memory;  /* "gpu", "host" or NULL (gpu when the file has a GPU digest) */
    const char *net;     /* "put", "staged", "tcp" or NULL (the first the file has) */
    const char *publish; /* "slot" (the trainers copy into a publish slot first) or "single"/NULL */
    uint64_t image, chunk;
    /* From --tp's node plans (0: none): the most bytes a node needs, a rank
     * lands and a rank holds. */
    uint64_t tp_node, tp_land, tp_hold;
    /* Delta pulls (docs/DELTA.md): "on", "off", "auto" or NULL (auto with a
     * density, else off); the changed fraction of elements; their width in
     * bytes (0: 2, bf16). */
    const char *delta;
    double delta_density;
    int delta_width;
    /* FP8 on the way (docs/FP8.md): "fp8" (the image given is the trainers'
     * bf16; engines get 128 x 128 block FP8 with fp32 scales), or NULL. */
    const char *quant;
} plan_predict_opts_t;

/* Prints the prediction; returns the exit status (0, 1, or 2 for bad input,
 * after a message). */
int plan_predict_run(const plan_predict_opts_t *o);

#endif
