/* plan_test.c: the plan's invariants over a thousand random topologies and
 * layouts: every byte of a node's image lands exactly once, a piece's source
 * owns it, ranks send only what they own, landing is balanced, deterministic. */
#include "common/plan.h"
#include "tests/test.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static uint64_t rnd_range(uint64_t lo, uint64_t hi)
{
    return lo + rnd() % (hi - lo + 1);
}

/* A random manifest: tiny, zero-sized, scalar and odd-shaped tensors. */
static wsync_manifest_t *random_manifest(void)
{
    wsync_manifest_t *m = NULL;
    int n = (int)rnd_range(1, 40), i;
    wsync_manifest_create(&m);
    for (i = 0; i < n; i++) {
        char name[32];
        int64_t shape[3];
        int ndim = (int)rnd_range(0, 3), d;
        wsync_dtype_t dt = (wsync_dtype_t)rnd_range(WSYNC_DTYPE_U8, WSYNC_DTYPE_U64);
        for (d = 0; d < ndim; d++)
            shape[d] = rnd() % 8 == 0 ? 0 : (int64_t)rnd_range(1, d == 0 ? 3000 : 50);
        snprintf(name, sizeof(name), "t%d", i);
        wsync_manifest_add(m, name, dt, ndim, shape);
    }
    return m;
}

/* Checks every invariant of one plan; returns 0 when all hold. */
static int check_plan(const wsync_layout_t *l, const wsync_plan_t *p, int L)
{
    unsigned char *owner_seen;
    uint64_t i, covered = 0, fair, *land;
    size_t k;
    int r, bad = 0;

    CHECK_EQ(p->image_size, l->image_size);
    owner_seen = calloc(p->image_size + 1, 1);
    land = calloc((size_t)L, sizeof(*land));
    for (k = 0; k < p->npieces; k++) {
        const wsync_piece_t *pc = &p->pieces[k];
        size_t e;
        int owned = 0;
        if (pc->id != k || pc->len == 0 || pc->offset / p->chunk_size != pc->chunk ||
            (pc->offset + pc->len - 1) / p->chunk_size != pc->chunk)
            bad = 1; /* ids in order, never empty, never across a chunk boundary */
        if (k > 0 && p->pieces[k - 1].offset + p->pieces[k - 1].len != pc->offset)
            bad = 1; /* sorted, contiguous */
        for (e = 0; e < l->nextents[pc->src_rank]; e++) {
            const wsync_extent_t *x = &l->extents[pc->src_rank][e];
            if (pc->offset >= x->offset && pc->offset + pc->len <= x->offset + x->len)
                owned = 1;
        }
        if (!owned)
            bad = 1; /* the source rank owns the piece */
        for (i = pc->offset; i < pc->offset + pc->len; i++) {
            if (owner_seen[i])
                bad = 1; /* each byte exactly once */
            owner_seen[i] = 1;
        }
        covered += pc->len;
        land[wsync_plan_land_rank(p, pc->chunk, L)] += pc->len;
    }
    if (covered != p->image_size)
        bad = 1;
    /* Each rank's send list holds exactly its pieces, in offset order. */
    for (r = 0; r < p->world; r++) {
        uint64_t owned = 0;
        for (k = 0; k < l->nextents[r]; k++)
            owned += l->extents[r][k].len;
        if (owned != wsync_plan_rank_send_bytes(p, r))
            bad = 1;
        for (k = 0; k < p->rank_npieces[r]; k++)
            if (p->pieces[p->rank_pieces[r][k]].src_rank != r ||
                (k > 0 && p->rank_pieces[r][k] <= p->rank_pieces[r][k - 1]))
                bad = 1;
    }
    /* Balanced landing: at most the fair share plus one chunk. */
    fair = (p->image_size + (uint64_t)L - 1) / (uint64_t)L;
    for (r = 0; r < L; r++) {
        if (land[r] > fair + p->chunk_size)
            bad = 1;
        if (land[r] != wsync_plan_land_bytes(p, r, L))
            bad = 1;
    }
    for (k = 0; k < p->nchunks; k++)
        if (p->chunk_first[k] > p->chunk_first[k + 1])
            bad = 1;
    free(owner_seen);
    free(land);
    return bad;
}

static int same_plan(const wsync_plan_t *a, const wsync_plan_t *b)
{
    size_t k;
    if (a->npieces != b->npieces || a->nchunks != b->nchunks)
        return 0;
    for (k = 0; k < a->npieces; k++)
        if (a->pieces[k].id != b->pieces[k].id || a->pieces[k].chunk != b->pieces[k].chunk ||
            a->pieces[k].src_rank != b->pieces[k].src_rank || a->pieces[k].offset != b->pieces[k].offset ||
            a->pieces[k].len != b->pieces[k].len)
            return 0;
    return 1;
}

static void invariants_hold_over_random_topologies(void)
{
    int trial, failures = 0;
    for (trial = 0; trial < 1000; trial++) {
        wsync_manifest_t *m = random_manifest();
        wsync_layout_t *l = NULL;
        wsync_plan_t *p = NULL, *p2 = NULL;
        int W = (int)rnd_range(1, 64), L = (int)rnd_range(1, 16), kind = (int)(rnd() % 3);
        uint64_t chunk = 4096ULL << rnd_range(0, 6);
        wsync_status_t st;
        if (kind == 0)
            st = wsync_layout_even(m->image_size, W, &l);
        else if (kind == 1)
            st = wsync_layout_fsdp(m, W, &l);
        else
            st = wsync_layout_even(rnd_range(1, 300000), W, &l); /* odd sizes, not multiples of 256 */
        CHECK_OK(st);
        if (st == WSYNC_OK) {
            CHECK_OK(wsync_plan_build(l, chunk, &p));
            CHECK_OK(wsync_plan_build(l, chunk, &p2));
            if (p && p2) {
                if (check_plan(l, p, L)) {
                    fprintf(stderr, "  trial %d: W=%d L=%d kind=%d chunk=%llu size=%llu violates an invariant\n",
                            trial, W, L, kind, (unsigned long long)chunk, (unsigned long long)l->image_size);
                    failures++;
                }
                /* Deterministic: the same inputs give the same plan. */
                CHECK(same_plan(p, p2));
            }
        }
        wsync_plan_free(p);
        wsync_plan_free(p2);
        wsync_layout_free(l);
        wsync_manifest_free(m);
    }
    CHECK_EQ(failures, 0);
}

static void even_layout_shards_are_aligned_and_cover(void)
{
    wsync_layout_t *l = NULL;
    CHECK_OK(wsync_layout_even(1000, 3, &l));
    CHECK_EQ(l->nextents[0], 1);
    CHECK_EQ(l->extents[0][0].len, 512);   /* ceil(1000/3) rounded up to 256 */
    CHECK_EQ(l->extents[1][0].offset, 512);
    CHECK_EQ(l->extents[1][0].len, 488);
    CHECK_EQ(l->nextents[2], 0);            /* nothing left for rank 2 */
    wsync_layout_free(l);
}

static void fsdp_layout_splits_dim0(void)
{
    wsync_manifest_t *m = NULL;
    wsync_layout_t *l = NULL;
    int64_t s1[2] = {4, 64}, s0[1] = {3};
    wsync_manifest_create(&m);
    wsync_manifest_add(m, "a", WSYNC_DTYPE_F32, 2, s1);   /* 1024 bytes, 256 per row */
    wsync_manifest_add(m, "b", WSYNC_DTYPE_F32, 1, s0);   /* 12 bytes, at 1024 */
    CHECK_OK(wsync_layout_fsdp(m, 2, &l));
    /* rank 0: rows 0-1 of a, then b's first 2 rows... */
    CHECK_EQ(l->extents[0][0].offset, 0);
    CHECK_EQ(l->extents[0][0].len, 512);
    CHECK_EQ(l->extents[1][0].offset, 512);
    CHECK_EQ(l->extents[1][0].len, 512);
    wsync_layout_free(l);
    wsync_manifest_free(m);
}

static void explicit_layout_refuses_gaps_and_overlaps(void)
{
    wsync_layout_t *l = NULL;
    wsync_extent_t a[1] = {{0, 100}}, b[1] = {{100, 156}}, c[1] = {{90, 166}}, d[1] = {{120, 136}};
    const wsync_extent_t *ok[2] = {a, b}, *overlap[2] = {a, c}, *gap[2] = {a, d};
    size_t n[2] = {1, 1};
    CHECK_OK(wsync_layout_explicit(256, 2, n, ok, &l));
    wsync_layout_free(l);
    CHECK_FAILS(wsync_layout_explicit(256, 2, n, overlap, &l), WSYNC_ERR_INVALID, "owned twice");
    CHECK_FAILS(wsync_layout_explicit(256, 2, n, gap, &l), WSYNC_ERR_INVALID, "owned by no rank");
}

static void bad_chunk_sizes_are_refused(void)
{
    wsync_layout_t *l = NULL;
    wsync_plan_t *p = NULL;
    CHECK_OK(wsync_layout_even(1 << 20, 2, &l));
    CHECK_FAILS(wsync_plan_build(l, 0, &p), WSYNC_ERR_INVALID, "chunk size");
    CHECK_FAILS(wsync_plan_build(l, 5000, &p), WSYNC_ERR_INVALID, "multiple of 256");
    wsync_layout_free(l);
}

int main(void)
{
    RUN(invariants_hold_over_random_topologies);
    RUN(even_layout_shards_are_aligned_and_cover);
    RUN(fsdp_layout_splits_dim0);
    RUN(explicit_layout_refuses_gaps_and_overlaps);
    RUN(bad_chunk_sizes_are_refused);
    TEST_EXIT();
}
