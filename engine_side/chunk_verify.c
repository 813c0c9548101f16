/* chunk_verify.c: a pull's chunks verified one by one against the published
 * digests of their units, now or, with late digests, once they are in
 * (chunk_verify.h). */
#include "engine_side/chunk_verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/base/log.h"
#include "common/digest/digest.h"

/* Late digests: the thread that waits for them, and room for the sums of
 * the chunks that come first. */
static wsync_status_t late_begin(recv_verify_t *v, const recv_pull_t *p)
{
    v->late = calloc(1, sizeof(*v->late));
    v->late_sum = calloc(v->nunits + 1, sizeof(*v->late_sum));
    v->waiting = calloc((size_t)p->nchunks + 1, sizeof(*v->waiting));
    v->wlanded = calloc((size_t)p->nchunks + 1, 1);
    if (!v->late || !v->late_sum || !v->waiting || !v->wlanded) {
        free(v->late);
        v->late = NULL;
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    }
    if (recv_late_start(v->late, p->r->control_url, p->r->token, p->sl, p->v, p->deadline) != WSYNC_OK) {
        free(v->late);
        v->late = NULL;
        return WSYNC_ERR_NOMEM;
    }
    wsync_trace("engine %s rank %d: version %llu was announced before its digests: landing while they come",
                p->r->engine_id, p->me, (unsigned long long)p->v);
    return WSYNC_OK;
}

wsync_status_t recv_verify_begin(recv_verify_t *v, const recv_pull_t *p, size_t nunits, size_t maxunits,
                                 const uint64_t *digests, int late)
{
    v->digests = late ? NULL : digests;
    v->nunits = nunits;
    v->rg = calloc(maxunits + 1, sizeof(*v->rg));
    v->sums = calloc(maxunits + 1, sizeof(*v->sums));
    v->put_sum = calloc(nunits + 1, sizeof(*v->put_sum));
    v->has_put_sum = calloc(nunits + 1, 1);
    if (!v->rg || !v->sums || !v->put_sum || !v->has_put_sum)
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory");
    return late ? late_begin(v, p) : WSYNC_OK;
}

void recv_verify_unit_landed(recv_verify_t *v, uint32_t id, const wsync_completion_t *cp)
{
    v->put_sum[id] = cp->sum;
    v->has_put_sum[id] = cp->has_sum != 0;
}

void recv_verify_reasked(recv_verify_t *v, size_t first, size_t n)
{
    memset(v->has_put_sum + first, 0, n);
}

size_t recv_verify_ranges(const recv_pull_t *p, recv_verify_t *v, uint32_t c, const char *image)
{
    size_t first, k, n = p->ops->chunk_units(p, c, &first);
    for (k = 0; k < n; k++) {
        uint32_t ch;
        uint64_t off = p->ops->unit_off(p, first + k), len = 0;
        p->ops->unit_at(p, (uint32_t)(first + k), &ch, &len);
        v->rg[k] = (wsync_digest_range_t){.ptr = image + off, .len = len, .off = off};
    }
    return n;
}

/* 1 if every unit of chunk c came with the sum of the bytes its put wrote. */
static int has_put_sums(const recv_pull_t *p, const recv_verify_t *v, uint32_t c)
{
    size_t first, k, n = p->ops->chunk_units(p, c, &first);
    for (k = 0; k < n; k++)
        if (!v->has_put_sum[first + k])
            return 0;
    return 1;
}

const uint64_t *recv_verify_put_sums(const recv_pull_t *p, const recv_verify_t *v, uint32_t c)
{
    size_t first;
    if (!has_put_sums(p, v, c))
        return NULL;
    p->ops->chunk_units(p, c, &first);
    return v->put_sum + first;
}

wsync_status_t recv_verify_landed(recv_pull_t *p, recv_verify_t *v, uint32_t c, const char *image)
{
    size_t first, n;
    if (has_put_sums(p, v, c)) {
        p->ops->chunk_units(p, c, &first);
        return recv_verify_summed(p, v, c, 1, v->put_sum + first);
    }
    n = recv_verify_ranges(p, v, c, image);
    WSYNC_CHECK(p->r->mem->digest_many(v->rg, n, v->sums));
    return recv_verify_summed(p, v, c, 1, v->sums);
}

/* Units first..first+n-1, whose sums are `sums`, against the published
 * digests. */
static wsync_status_t check_units(const recv_pull_t *p, const recv_verify_t *v, size_t first, size_t n,
                                  const uint64_t *sums)
{
    size_t k;
    for (k = 0; k < n; k++) {
        const size_t i = first + k;
        const uint64_t off = p->ops->unit_off(p, i);
        uint64_t len = 0, d;
        uint32_t ch;
        char what[200];
        p->ops->unit_at(p, (uint32_t)i, &ch, &len);
        d = wsync_digest_final(sums[k], len, off);
        if (d == v->digests[i])
            continue;
        wsync_manifest_describe_range(p->sl->manifest, off, off + len, what, sizeof(what));
        return wsync_error(WSYNC_ERR_DIGEST,
                           "version %llu, %s %zu (bytes %llu..%llu, %s, from trainer rank %d) failed "
                           "verification on engine %s rank %d: digest %016llx, published %016llx",
                           (unsigned long long)p->v, p->ops->unit1, i, (unsigned long long)off,
                           (unsigned long long)(off + len), what, p->ops->unit_src(p, i), p->r->engine_id, p->me,
                           (unsigned long long)d, (unsigned long long)v->digests[i]);
    }
    return WSYNC_OK;
}

wsync_status_t recv_verify_summed(recv_pull_t *p, recv_verify_t *v, uint32_t c, int landed, const uint64_t *sums)
{
    size_t first, n = p->ops->chunk_units(p, c, &first);
    if (v->digests) {
        int again = 0;
        if (landed && p->ops->landed_check) {
            WSYNC_CHECK(p->ops->landed_check(p, c, sums, &again));
            if (again)
                return WSYNC_OK; /* asked again in full: verified when it lands again */
        }
        WSYNC_CHECK(check_units(p, v, first, n, sums));
        return p->ops->chunk_verified(p, c, landed);
    }
    memmove(v->late_sum + first, sums, n * sizeof(*sums));
    v->wlanded[c] = (unsigned char)landed;
    v->waiting[v->nwaiting++] = c;
    return WSYNC_OK;
}

int recv_verify_all_summed(const recv_pull_t *p, const recv_verify_t *v)
{
    return p->ndone + v->nwaiting >= p->nwant;
}

wsync_status_t recv_verify_late_poll(recv_pull_t *p, recv_verify_t *v, int *progressed)
{
    const uint64_t *d = NULL;
    uint32_t k, n = v->nwaiting;
    int in = 0;
    if (v->late == NULL || v->digests)
        return WSYNC_OK;
    WSYNC_CHECK(recv_late_poll(v->late, &d, &in));
    if (!in)
        return WSYNC_OK;
    v->digests = d;
    wsync_trace("engine %s rank %d: late digests of version %llu in, %u chunks waited for them", p->r->engine_id,
                p->me, (unsigned long long)p->v, n);
    v->nwaiting = 0;
    for (k = 0; k < n; k++) {
        uint32_t c = v->waiting[k];
        size_t first;
        p->ops->chunk_units(p, c, &first);
        WSYNC_CHECK(recv_verify_summed(p, v, c, v->wlanded[c], v->late_sum + first));
    }
    *progressed = 1;
    return WSYNC_OK;
}

void recv_verify_waiting(const recv_pull_t *p, const recv_verify_t *v, char *out, size_t len)
{
    char who[160];
    if (v->late == NULL || v->digests != NULL)
        return;
    recv_late_missing(v->late, who, sizeof(who));
    snprintf(out, len,
             "; %u chunks summed and waiting for the late digests of %s, which never came (announced before its "
             "digests: it stopped or failed after announcing?)",
             v->nwaiting, who);
}

void recv_verify_end(recv_verify_t *v)
{
    if (v->late) {
        recv_late_end(v->late); /* frees the digests v->digests may point to */
        free(v->late);
    }
    free(v->late_sum);
    free(v->waiting);
    free(v->wlanded);
    free(v->rg);
    free(v->sums);
    free(v->put_sum);
    free(v->has_put_sum);
    memset(v, 0, sizeof(*v));
}
