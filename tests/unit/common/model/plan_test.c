/* plan_test.c: the plan's invariants over a thousand random topologies and
 * layouts: every byte of a node's image lands exactly once, a piece's source
 * owns it, ranks send only what they own, landing is balanced, deterministic. */
#include "common/model/plan.h"
#include "common/base/util.h"
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

/* A random explicit layout of `size` bytes: cut at random points (some not
 * multiples of 256), each extent given to a random rank, so ranks own several
 * scattered extents and some own nothing. */
static wsync_status_t random_explicit(uint64_t size, int W, wsync_layout_t **out)
{
    size_t *n = calloc((size_t)W, sizeof(*n)), cuts = (size_t)rnd_range(0, 30), i;
    wsync_extent_t **ext = calloc((size_t)W, sizeof(*ext));
    uint64_t pos = 0;
    wsync_status_t st;
    int r;
    for (r = 0; r < W; r++)
        ext[r] = calloc(cuts + 1, sizeof(wsync_extent_t));
    for (i = 0; i <= cuts && pos < size; i++) {
        uint64_t len = i == cuts ? size - pos : rnd_range(1, size - pos);
        r = (int)(rnd() % (uint64_t)W);
        if (rnd() % 2)
            len = wsync_align_up(len, WSYNC_ALIGN) < size - pos ? wsync_align_up(len, WSYNC_ALIGN) : size - pos;
        ext[r][n[r]++] = (wsync_extent_t){pos, len};
        pos += len;
    }
    st = wsync_layout_explicit(size, W, n, (const wsync_extent_t *const *)ext, out);
    for (r = 0; r < W; r++)
        free(ext[r]);
    free(ext);
    free(n);
    return st;
}

/* Checks every invariant of one plan; returns 0 when all hold. */
static int check_plan(const wsync_layout_t *l, const wsync_plan_t *p, int L)
{
    uint64_t covered = 0, fair, *land;
    size_t k;
    int r, bad = 0;

    CHECK_EQ(p->image_size, l->image_size);
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
        covered += pc->len;
        land[wsync_plan_land_rank(p, pc->chunk, L)] += pc->len;
    }
    /* Each byte of the image exactly once (hence lands exactly once, on the
     * one local rank its chunk lands on, in every node): pieces are
     * non-empty, start at 0, each starts where the previous ended (checked
     * above), and together they are as long as the image. */
    if (covered != p->image_size || (p->npieces > 0 && p->pieces[0].offset != 0) ||
        (p->npieces == 0 && p->image_size != 0))
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
    int trial, failures = 0, more_ranks_than_chunks = 0, idle_ranks = 0, kinds[4] = {0};
    for (trial = 0; trial < 1200; trial++) {
        wsync_manifest_t *m = random_manifest();
        wsync_layout_t *l = NULL;
        wsync_plan_t *p = NULL, *p2 = NULL;
        int W = (int)rnd_range(1, 64), L = (int)rnd_range(1, 16), kind = (int)(rnd() % 4);
        /* Powers of two, and any multiple of 256 from 4 KiB up. */
        uint64_t chunk = rnd() % 2 ? 4096ULL << rnd_range(0, 6) : 4096 + 256 * rnd_range(0, 200);
        wsync_status_t st;
        if (kind == 0)
            st = wsync_layout_even(m->image_size, W, &l);
        else if (kind == 1)
            st = wsync_layout_fsdp(m, W, &l);
        else if (kind == 2)
            st = wsync_layout_even(rnd_range(1, 300000), W, &l); /* odd sizes, not multiples of 256 */
        else
            st = random_explicit(rnd_range(1, 300000), W, &l);
        CHECK_OK(st);
        if (st == WSYNC_OK) {
            CHECK_OK(wsync_plan_build(l, chunk, &p));
            CHECK_OK(wsync_plan_build(l, chunk, &p2));
            if (p && p2) {
                int r;
                kinds[kind]++;
                more_ranks_than_chunks += (uint32_t)W > p->nchunks;
                for (r = 0; r < W; r++)
                    idle_ranks += p->rank_npieces[r] == 0;
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
    /* The random mix did reach the corners it is meant to reach. */
    CHECK(more_ranks_than_chunks > 0);
    CHECK(idle_ranks > 0);
    CHECK(kinds[0] > 0 && kinds[1] > 0 && kinds[2] > 0 && kinds[3] > 0);
}

static void even_layout_shards_are_aligned_and_cover(void)
{
    wsync_layout_t *l = NULL;
    CHECK_OK(wsync_layout_even(1000, 3, &l));
    CHECK_EQ(l->nextents[0], 1);
    CHECK_EQ(l->extents[0][0].len, 512); /* ceil(1000/3) rounded up to 256 */
    CHECK_EQ(l->extents[1][0].offset, 512);
    CHECK_EQ(l->extents[1][0].len, 488);
    CHECK_EQ(l->nextents[2], 0); /* nothing left for rank 2 */
    wsync_layout_free(l);
}

static void fsdp_layout_splits_dim0(void)
{
    wsync_manifest_t *m = NULL;
    wsync_layout_t *l = NULL;
    int64_t s1[2] = {4, 64}, s0[1] = {3};
    wsync_manifest_create(&m);
    wsync_manifest_add(m, "a", WSYNC_DTYPE_F32, 2, s1); /* 1024 bytes, 256 per row */
    wsync_manifest_add(m, "b", WSYNC_DTYPE_F32, 1, s0); /* 12 bytes, at 1024 */
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
    wsync_extent_t e[1] = {{100, 0}}, f[1] = {{100, 200}}, g[2] = {{100, 50}, {100, 106}}, h[1] = {{100, 100}};
    const wsync_extent_t *ok[2] = {a, b}, *overlap[2] = {a, c}, *gap[2] = {a, d}, *empty[2] = {a, e};
    const wsync_extent_t *past[2] = {a, f}, *unsorted[2] = {a, g}, *short_end[2] = {a, h};
    size_t n[2] = {1, 1}, n2[2] = {1, 2};
    CHECK_OK(wsync_layout_explicit(256, 2, n, ok, &l));
    CHECK_EQ(l->nextents[1], 1);
    CHECK_EQ(l->extents[1][0].offset, 100);
    wsync_layout_free(l);
    /* Each message names the rank and the offset where the layout goes wrong. */
    CHECK_FAILS(wsync_layout_explicit(256, 2, n, overlap, &l), WSYNC_ERR_INVALID,
                "rank 1's extent at offset 90 overlaps bytes up to offset 100 that rank 0 owns: bytes owned "
                "twice");
    CHECK_FAILS(wsync_layout_explicit(256, 2, n, gap, &l), WSYNC_ERR_INVALID,
                "bytes from offset 100 to 120 are owned by no rank (the next extent is rank 1's");
    CHECK_FAILS(wsync_layout_explicit(256, 2, n, empty, &l), WSYNC_ERR_INVALID,
                "rank 1 extent 0 at offset 100 (+0) is empty");
    CHECK_FAILS(wsync_layout_explicit(256, 2, n, past, &l), WSYNC_ERR_INVALID,
                "rank 1 extent 0 at offset 100 (+200) ends past");
    CHECK_FAILS(wsync_layout_explicit(256, 2, n2, unsorted, &l), WSYNC_ERR_INVALID,
                "rank 1 extent 1 at offset 100 (+106) starts before the end");
    CHECK_FAILS(wsync_layout_explicit(256, 2, n, short_end, &l), WSYNC_ERR_INVALID,
                "bytes from offset 200 to the end (256) are owned by no rank");
    CHECK_FAILS(wsync_layout_explicit(256, 0, n, ok, &l), WSYNC_ERR_INVALID, "world size");
}

static void fsdp_gives_padding_and_scalars_to_rank_0(void)
{
    wsync_manifest_t *m = NULL;
    wsync_layout_t *l = NULL;
    int64_t sa[2] = {4, 64}, sz[2] = {0, 5}, sb[1] = {3};
    uint64_t xb;
    CHECK_OK(wsync_manifest_create(&m));
    CHECK_OK(wsync_manifest_add(m, "a", WSYNC_DTYPE_F32, 2, sa));   /* 1024 bytes at 0, 256 a row */
    CHECK_OK(wsync_manifest_add(m, "s", WSYNC_DTYPE_F32, 0, NULL)); /* scalar, 4 bytes at 1024 */
    CHECK_OK(wsync_manifest_add(m, "z", WSYNC_DTYPE_F32, 2, sz));   /* zero-sized */
    CHECK_OK(wsync_manifest_add(m, "b", WSYNC_DTYPE_F32, 1, sb));   /* 3 rows of 4 bytes */
    xb = m->tensors[3].offset;
    CHECK(xb >= 1280 && m->image_size == xb + 256);
    CHECK_OK(wsync_layout_fsdp(m, 2, &l));
    if (l != NULL) {
        /* rank 0: rows 0-1 of a; then the scalar, the padding after it, the
         * zero-sized tensor (nothing) and rows 0-1 of b, merged into one
         * extent; then the padding at the end. rank 1: rows 2-3 of a, row 2 of b. */
        CHECK_EQ(l->nextents[0], 3);
        CHECK_EQ(l->extents[0][0].offset, 0);
        CHECK_EQ(l->extents[0][0].len, 512);
        CHECK_EQ(l->extents[0][1].offset, 1024);
        CHECK_EQ(l->extents[0][1].len, xb + 8 - 1024);
        CHECK_EQ(l->extents[0][2].offset, xb + 12);
        CHECK_EQ(l->extents[0][2].len, m->image_size - xb - 12);
        CHECK_EQ(l->nextents[1], 2);
        CHECK_EQ(l->extents[1][0].offset, 512);
        CHECK_EQ(l->extents[1][0].len, 512);
        CHECK_EQ(l->extents[1][1].offset, xb + 8);
        CHECK_EQ(l->extents[1][1].len, 4);
    }
    wsync_layout_free(l);
    l = NULL;
    /* More ranks than rows: ranks past the rows own nothing. */
    CHECK_OK(wsync_layout_fsdp(m, 8, &l));
    if (l != NULL) {
        CHECK_EQ(l->nextents[3], 1); /* row 3 of a */
        CHECK_EQ(l->nextents[4], 0);
        CHECK_EQ(l->nextents[7], 0);
    }
    wsync_layout_free(l);
    wsync_manifest_free(m);
}

static void more_ranks_than_bytes_and_empty_images_plan_fine(void)
{
    wsync_layout_t *l = NULL;
    wsync_plan_t *p = NULL;
    int r, owners = 0;
    CHECK_OK(wsync_layout_even(300, 64, &l)); /* 256-byte shards: ranks 0 and 1 */
    CHECK_OK(wsync_plan_build(l, 4096, &p));
    if (p != NULL) {
        CHECK_EQ(p->nchunks, 1);
        CHECK_EQ(p->npieces, 2);
        for (r = 0; r < 64; r++)
            owners += p->rank_npieces[r] > 0;
        CHECK_EQ(owners, 2);
        CHECK_EQ(wsync_plan_rank_send_bytes(p, 1), 44);
        CHECK_EQ(wsync_plan_land_bytes(p, 0, 4), 300); /* one chunk: all on local rank 0 */
        CHECK_EQ(wsync_plan_land_bytes(p, 3, 4), 0);
    }
    wsync_plan_free(p);
    wsync_layout_free(l);
    p = NULL;
    l = NULL;
    CHECK_OK(wsync_layout_even(0, 3, &l));
    CHECK_OK(wsync_plan_build(l, 4096, &p));
    if (p != NULL) {
        CHECK_EQ(p->nchunks, 0);
        CHECK_EQ(p->npieces, 0);
    }
    wsync_plan_free(p);
    wsync_layout_free(l);
}

static void pieces_split_at_chunk_boundaries_in_send_order(void)
{
    /* rank 0 owns [0, 5000) and [12288, 12300); rank 1 owns [5000, 12288). */
    wsync_extent_t r0[2] = {{0, 5000}, {12288, 12}}, r1[1] = {{5000, 7288}};
    const wsync_extent_t *ex[2] = {r0, r1};
    size_t n[2] = {2, 1};
    wsync_layout_t *l = NULL;
    wsync_plan_t *p = NULL;
    CHECK_OK(wsync_layout_explicit(12300, 2, n, ex, &l));
    CHECK_OK(wsync_plan_build(l, 4096, &p));
    if (p != NULL) {
        /* chunk 0: [0,4096) r0; chunk 1: [4096,5000) r0, [5000,8192) r1;
         * chunk 2: [8192,12288) r1; chunk 3: [12288,12300) r0. */
        CHECK_EQ(p->nchunks, 4);
        CHECK_EQ(p->npieces, 5);
        CHECK_EQ(p->pieces[1].offset, 4096);
        CHECK_EQ(p->pieces[1].len, 904);
        CHECK_EQ(p->pieces[2].src_rank, 1);
        CHECK_EQ(p->pieces[2].chunk, 1);
        CHECK_EQ(p->chunk_first[1], 1);
        CHECK_EQ(p->chunk_first[2], 3);
        CHECK_EQ(p->chunk_first[4], 5);
        CHECK_EQ(p->rank_npieces[0], 3);
        CHECK_EQ(p->rank_pieces[0][0], 0);
        CHECK_EQ(p->rank_pieces[0][1], 1);
        CHECK_EQ(p->rank_pieces[0][2], 4);
        CHECK_EQ(wsync_plan_land_bytes(p, 1, 2), (4096 + 12));
    }
    wsync_plan_free(p);
    wsync_layout_free(l);
}

static void bad_chunk_sizes_are_refused(void)
{
    wsync_layout_t *l = NULL;
    wsync_plan_t *p = NULL;
    CHECK_OK(wsync_layout_even(1 << 20, 2, &l));
    CHECK_FAILS(wsync_plan_build(l, 0, &p), WSYNC_ERR_INVALID, "chunk size 0 is too small");
    CHECK_FAILS(wsync_plan_build(l, 2048, &p), WSYNC_ERR_INVALID, "at least 4096");
    CHECK_FAILS(wsync_plan_build(l, 5000, &p), WSYNC_ERR_INVALID, "chunk size 5000 is not a multiple of 256");
    CHECK_OK(wsync_plan_build(l, 4096 + 256, &p));
    wsync_plan_free(p);
    wsync_layout_free(l);
}

int main(void)
{
    RUN(invariants_hold_over_random_topologies);
    RUN(even_layout_shards_are_aligned_and_cover);
    RUN(fsdp_layout_splits_dim0);
    RUN(explicit_layout_refuses_gaps_and_overlaps);
    RUN(fsdp_gives_padding_and_scalars_to_rank_0);
    RUN(more_ranks_than_bytes_and_empty_images_plan_fine);
    RUN(pieces_split_at_chunk_boundaries_in_send_order);
    RUN(bad_chunk_sizes_are_refused);
    TEST_EXIT();
}
