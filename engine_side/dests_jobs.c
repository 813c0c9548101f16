/* dests_jobs.c: whole-image chunks written through into the caller's
 * destination tensors as jobs, digested on the way (dests.h:
 * recv_dgroup_start, _poll, _end). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/digest/digest.h"
#include "engine_side/dests.h"

/* Host memory: copy image bytes [s, e) of destination d from `src` block by
 * block and digest each caller part (rg[0..n), in d, in image order) right
 * behind the copy, while its bytes are still in cache: one pass over memory
 * fewer than a streamed copy and a digest after it (which is what
 * copy_digest_start does on the host). Blocks stay under the size from which
 * wsync_host_copy streams past the cache. */
static void host_write_digest(const recv_dest_t *d, const char *src, uint64_t s, uint64_t e,
                              const wsync_digest_range_t *rg, size_t n, uint64_t *sums)
{
    enum { BLOCK = 128 << 10 };
    uint64_t at = s;
    size_t k;
    for (k = 0; k < n; k++) {
        const char *p = rg[k].ptr;
        const uint64_t start = d->off + (uint64_t)(p - d->ptr);
        uint64_t done = 0;
        sums[k] = 0;
        while (done < rg[k].len) {
            uint64_t len = rg[k].len - done < BLOCK ? rg[k].len - done : BLOCK;
            while (at < start + done + len) {
                uint64_t c = e - at < BLOCK ? e - at : BLOCK;
                memcpy(d->ptr + (at - d->off), src + at, c);
                at += c;
            }
            sums[k] += wsync_digest_sum(p + done, len, wsync_digest_key_at(rg[k].off, done / 8));
            done += len;
        }
    }
    if (at < e)
        memcpy(d->ptr + (at - d->off), src + at, e - at);
}

/* Direct (recv_dests_direct): image bytes [s, e) of destination d that
 * passed through the image, the words across its edges (dest_interior), copied
 * into it from `src`; then the digests of its parts. */
static void host_ends_digest(const recv_dest_t *d, int word_edges, const char *src, uint64_t s, uint64_t e,
                             const wsync_digest_range_t *rg, size_t n, uint64_t *sums)
{
    uint64_t head, tail, t;
    size_t k;
    if (!recv_dest_interior(d, word_edges, &head, &tail))
        head = tail = d->off + d->size; /* the whole destination passed the image */
    if (s < head)
        memcpy(d->ptr + (s - d->off), src + s, (e < head ? e : head) - s);
    t = s > tail ? s : tail;
    if (t < e)
        memcpy(d->ptr + (t - d->off), src + t, e - t);
    for (k = 0; k < n; k++)
        sums[k] = wsync_digest_sum(rg[k].ptr, rg[k].len, rg[k].off);
}

wsync_status_t recv_dgroup_start(recv_dgroup_t *g, const wsync_mem_ops_t *mem, const recv_dests_t *ds, char *image,
                                 const char *src, uint64_t off, uint64_t len, const wsync_digest_range_t *pieces,
                                 size_t npieces, int direct)
{
    recv_parts_t all = {0};
    wsync_status_t st = WSYNC_OK;
    const size_t base = recv_dests_after(ds, off);
    size_t i, j, nd = 0, *at = NULL;
    memset(g, 0, sizeof(*g));
    g->npieces = npieces;
    for (i = 0; i < npieces; i++)
        WSYNC_CHECK_GOTO(recv_parts_split(&all, ds, image, (uint64_t)((const char *)pieces[i].ptr - image),
                                          pieces[i].len, pieces[i].off, (uint32_t)i),
                         st, out);
    /* job 0: the image (the fan-out copy, the digests of bytes no
     * destination holds); job 1 + j: destination base + j, every one the
     * chunk touches (one too short to hold a whole word still gets its copy) */
    for (i = base; i < ds->n && ds->d[i].off < off + len; i++)
        nd++;
    g->jobs = calloc(nd + 1, sizeof(*g->jobs));
    g->first = calloc(nd + 2, sizeof(*g->first));
    g->ok = calloc(nd + 1, 1);
    g->psums = calloc(all.n + 1, sizeof(*g->psums));
    g->parts.rg = calloc(all.n + 1, sizeof(*g->parts.rg));
    g->parts.of = calloc(all.n + 1, sizeof(*g->parts.of));
    g->parts.dest = calloc(all.n + 1, sizeof(*g->parts.dest));
    at = calloc(nd + 2, sizeof(*at));
    if (!g->jobs || !g->first || !g->ok || !g->psums || !g->parts.rg || !g->parts.of || !g->parts.dest || !at) {
        st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* the parts in job order (a counting sort: linear in parts) */
    for (i = 0; i < all.n; i++)
        g->first[all.dest[i] < 0 ? 1 : (size_t)all.dest[i] - base + 2]++;
    for (j = 1; j <= nd + 1; j++)
        g->first[j] += g->first[j - 1];
    memcpy(at, g->first, (nd + 1) * sizeof(*at));
    for (i = 0; i < all.n; i++) {
        size_t jb = all.dest[i] < 0 ? 0 : (size_t)all.dest[i] - base + 1, to = at[jb]++;
        g->parts.rg[to] = all.rg[i];
        g->parts.of[to] = all.of[i];
        g->parts.dest[to] = all.dest[i];
    }
    g->parts.n = g->parts.cap = all.n;
    WSYNC_CHECK_GOTO(mem->copy_digest_start(image + off, src + off, src == image ? 0 : len, g->parts.rg,
                                            g->first[1], &g->jobs[0]),
                     st, out);
    g->njobs = 1;
    for (i = base, j = 1; j <= nd; i++, j++) {
        const recv_dest_t *d = &ds->d[i];
        uint64_t s = d->off > off ? d->off : off, e = d->off + d->size < off + len ? d->off + d->size : off + len;
        g->njobs++;
        if (mem->kind == WSYNC_MEM_HOST) { /* done here and now, as a host job would be */
            if (direct)
                host_ends_digest(d, ds->word_edges, src, s, e, g->parts.rg + g->first[j],
                                 g->first[j + 1] - g->first[j], g->psums + g->first[j]);
            else
                host_write_digest(d, src, s, e, g->parts.rg + g->first[j], g->first[j + 1] - g->first[j],
                                  g->psums + g->first[j]);
            g->ok[j] = 1;
            continue;
        }
        WSYNC_CHECK_GOTO(mem->copy_digest_start(d->ptr + (s - d->off), src + s, e - s, g->parts.rg + g->first[j],
                                                g->first[j + 1] - g->first[j], &g->jobs[j]),
                         st, out);
    }
out:
    free(at);
    recv_parts_free(&all);
    return st;
}

wsync_status_t recv_dgroup_poll(recv_dgroup_t *g, const wsync_mem_ops_t *mem, uint64_t *sums, int *done)
{
    size_t j, i;
    *done = 0;
    for (j = 0; j < g->njobs; j++) {
        int d = 0;
        if (g->ok[j])
            continue;
        WSYNC_CHECK(mem->job_poll(g->jobs[j], 0, g->psums + g->first[j], &d));
        if (!d)
            return WSYNC_OK;
        g->ok[j] = 1;
    }
    memset(sums, 0, g->npieces * sizeof(*sums));
    for (i = 0; i < g->parts.n; i++)
        sums[g->parts.of[i]] += g->psums[i];
    *done = 1;
    return WSYNC_OK;
}

void recv_dgroup_end(recv_dgroup_t *g, const wsync_mem_ops_t *mem)
{
    size_t j;
    for (j = 0; j < g->njobs; j++)
        if (g->jobs[j])
            mem->job_free(g->jobs[j]); /* waits: a copy must not outlive the attempt */
    recv_parts_free(&g->parts);
    free(g->jobs);
    free(g->first);
    free(g->ok);
    free(g->psums);
    memset(g, 0, sizeof(*g));
}
