/* quant.c: what FP8 on the way adds to a plan (docs/FP8.md): the trainers
 * publish bf16 and each quantizes its share to block FP8 before it digests
 * the FP8 bytes and scales (the digests are of what crosses), so the stage
 * is serial; everything after it (digest, crossing, landing, fan-out,
 * verification, a delta's encode and apply) carries the FP8 image, about
 * half the bytes, which the deployment's image_bytes already says. With
 * more than one trainer rank the shards may cut bands (fsdp dim-0 shards off
 * the 128-row grid): before it quantizes, each rank asks the ranks that
 * share its edge bands for their block maxima (trainer_side/fp8_amax.c), a
 * request and its answer with each of its two neighbours in turn, at most
 * one fp32 per 128 x 128 block of its share: a serial stage before the
 * quantization, over the trainers' tcp, or, in a links file without tcp, a
 * control round trip's latency per neighbour. */
#include "common/base/checks.h"
#include "common/cost/cost_internal.h"

static wsync_status_t add_maxima_exchange(cost_plan_t *p, const cost_links_t *links, double share)
{
    static const char what[] = "trainer rank's block maxima exchange with its neighbours";
    cost_class_t tc = links->link[COST_TCP_TRAINER].present ? COST_TCP_TRAINER : COST_TCP;
    cost_stage_t *s;
    if (!links->link[tc].present && !links->link[COST_CONTROL].present)
        return WSYNC_OK;
    s = cost_plan_stage(p, "amax", 0, 1);
    if (links->link[tc].present)
        return cost_stage_add(s, links, tc, what, share / (128.0 * 128.0 * 2.0) * 4.0, 4, links->link[tc].bw);
    return cost_stage_add(s, links, COST_CONTROL, what, 0, 2, 0);
}

wsync_status_t cost_add_quant(cost_plan_t *p, const cost_links_t *links, const cost_deploy_t *d)
{
    cost_class_t qc = d->mem == COST_MEM_GPU ? COST_QUANT_GPU : COST_QUANT_HOST;
    int one_gpu = d->net == COST_NET_LOCAL;
    double share = (double)d->quant_src_bytes / d->trainers;
    cost_stage_t *s;
    if (d->quant_src_bytes == 0)
        return WSYNC_OK;
    if (d->trainers > 1)
        WSYNC_CHECK(add_maxima_exchange(p, links, share));
    s = cost_plan_stage(p, "quant", 0, 1);
    WSYNC_CHECK(cost_stage_add(s, links, qc,
                               one_gpu ? "trainer ranks' FP8 quantization, one GPU"
                                       : "trainer rank's FP8 quantization of its bf16 share",
                               one_gpu ? (double)d->quant_src_bytes : share, 0, links->link[qc].bw));
    cost_plan_bytes(p, qc, (double)d->quant_src_bytes);
    return WSYNC_OK;
}
