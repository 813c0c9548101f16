/* quant.c: what FP8 on the way adds to a plan (docs/FP8.md): the trainers
 * publish bf16 and each quantizes its share to block FP8 before it digests
 * the FP8 bytes and scales (the digests are of what crosses), so the stage
 * is serial; everything after it (digest, crossing, landing, fan-out,
 * verification, a delta's encode and apply) carries the FP8 image, about
 * half the bytes, which the deployment's image_bytes already says. */
#include "common/base/checks.h"
#include "common/cost/cost_internal.h"

wsync_status_t cost_add_quant(cost_plan_t *p, const cost_links_t *links, const cost_deploy_t *d)
{
    cost_class_t qc = d->mem == COST_MEM_GPU ? COST_QUANT_GPU : COST_QUANT_HOST;
    int one_gpu = d->net == COST_NET_LOCAL;
    double share = (double)d->quant_src_bytes / d->trainers;
    cost_stage_t *s;
    if (d->quant_src_bytes == 0)
        return WSYNC_OK;
    s = cost_plan_stage(p, "quant", 0, 1);
    WSYNC_CHECK(cost_stage_add(s, links, qc,
                               one_gpu ? "trainer ranks' FP8 quantization, one GPU"
                                       : "trainer rank's FP8 quantization of its bf16 share",
                               one_gpu ? (double)d->quant_src_bytes : share, 0, links->link[qc].bw));
    cost_plan_bytes(p, qc, (double)d->quant_src_bytes);
    return WSYNC_OK;
}
