/* pack_test.c (GPU): the gather kernel equals the host gather and the
 * byte-by-byte gather on random runs of every shape, at odd source and
 * destination alignments, writing nothing outside its runs, both through
 * wsync_pack_cuda_start and through a prepared plan (launched at the bases
 * it was prepared for and 16 bytes on); one launch carries twenty thousand
 * column-slice runs; an empty job, polling, a caller's stream and a job
 * table that has to grow all work; a plan launched twice at once fills both
 * destinations, refuses bases its vectors do not fit, and an empty plan
 * launches; a batch of packed puts (one launch, the local transport's) lands
 * and sums each put as the host gather and the host digest do, reusing its
 * accumulators, and puts it cannot take are refused before a launch; without
 * a GPU the GPU pack fails with a message. */
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/digest/digest.h"
#include "common/pack/pack.h"
#include "tests/gpu/gpu_test.h"
#include "tests/test.h"
#include "tests/unit/common/pack/pack_random.h"

#if WSYNC_HAVE_CUDA
#include <cuda_runtime.h>
#endif

static int ngpu;

static void without_gpu_the_pack_says_why(void)
{
    wsync_pack_job_t *job = NULL;
    wsync_run2d_t r = {.row_bytes = 1, .rows = 1};
    char a = 0, b = 0;
    if (ngpu > 0)
        SKIP("a CUDA device is present");
    wsync_pack_plan_t *plan = NULL;
    CHECK(wsync_pack_cuda_start(&a, &b, &r, 1, NULL, &job) != WSYNC_OK);
    CHECK(wsync_last_error()[0] != '\0');
    CHECK_OK(wsync_pack_cuda_wait(NULL));
    wsync_error_clear();
    CHECK(wsync_pack_cuda_prepare(&r, 1, 0, 0, &plan) != WSYNC_OK);
    CHECK(plan == NULL && wsync_last_error()[0] != '\0');
    wsync_pack_cuda_plan_free(NULL);
}

/* Packs on the GPU (from src_dev + so into dst_dev + dof; with `plan`, by
 * launching it, else through wsync_pack_cuda_start), copies the destination
 * back and compares it, sentinel bytes around the runs included, with the
 * host gather and the byte gather of the same runs. */
static int pack_and_compare(unsigned char *src_dev, unsigned char *dst_dev, const unsigned char *src_host,
                            unsigned char *want, unsigned char *want2, unsigned char *got,
                            const wsync_run2d_t *runs, size_t n, uint64_t len, size_t so, size_t dof, void *stream,
                            const wsync_pack_plan_t *plan)
{
    wsync_pack_job_t *job = NULL;
    size_t span = len + dof + 64;
    int ok = 1;
    memset(want, SENTINEL, span);
    memset(want2, SENTINEL, span);
    CHECK_OK(wsync_mem_cuda.copy(dst_dev, want, span));
    wsync_pack_host(want + dof, src_host + so, runs, n);
    gather_bytes(want2 + dof, src_host + so, runs, n);
    if (plan)
        CHECK_OK(wsync_pack_cuda_launch(plan, dst_dev + dof, src_dev + so, stream, &job));
    else
        CHECK_OK(wsync_pack_cuda_start(dst_dev + dof, src_dev + so, runs, n, stream, &job));
    CHECK_OK(wsync_pack_cuda_wait(job));
    CHECK_OK(wsync_mem_cuda.copy(got, dst_dev, span));
    if (memcmp(want, want2, span) != 0) {
        fprintf(stderr, "  the host gather differs from the byte gather\n");
        ok = 0;
    }
    if (memcmp(got, want, span) != 0) {
        size_t i;
        for (i = 0; i < span && got[i] == want[i]; i++)
            ;
        fprintf(stderr, "  %zu runs, source +%zu, destination +%zu%s: GPU differs from the host at byte %zu\n", n,
                so, dof, plan ? " (prepared plan)" : "", i);
        ok = 0;
    }
    return ok;
}

static void gpu_gather_equals_host_gather_on_random_runs(void)
{
    unsigned char *src = malloc(SRC_LEN + 64), *want = malloc(DST_CAP + 128), *want2 = malloc(DST_CAP + 128),
                  *got = malloc(DST_CAP + 128), *src_dev = NULL, *dst_dev = NULL;
    wsync_run2d_t runs[64], keep[64];
    int bad = 0, iter;
    if (ngpu == 0) {
        free(src);
        free(want);
        free(want2);
        free(got);
        SKIP("no CUDA device");
    }
    CHECK(src && want && want2 && got);
    CHECK_OK(wsync_mem_cuda.alloc(SRC_LEN + 64, (void **)&src_dev));
    CHECK_OK(wsync_mem_cuda.alloc(DST_CAP + 128, (void **)&dst_dev));
    if (!src || !want || !want2 || !got || !src_dev || !dst_dev)
        goto out;
    fill_random(src, SRC_LEN + 64, 7);
    CHECK_OK(wsync_mem_cuda.copy(src_dev, src, SRC_LEN + 64));
    for (iter = 0; iter < 200; iter++) {
        size_t n = 1 + rnd(64), so = rnd(33), dof = rnd(33);
        uint64_t len = random_runs(runs, n, (int)rnd(2));
        wsync_pack_plan_t *plan = NULL;
        int ok;
        if (rnd(3) == 0)
            shuffle(runs, n);
        ok = pack_and_compare(src_dev, dst_dev, src, want, want2, got, runs, n, len, so, dof, NULL, NULL);
        /* the same runs as a plan, at its bases and at bases 16 bytes on
         * (the buffers have 128 bytes to spare past DST_CAP and 64 past
         * SRC_LEN) */
        CHECK_OK(wsync_pack_cuda_prepare(runs, n, (uintptr_t)(dst_dev + dof), (uintptr_t)(src_dev + so), &plan));
        if (plan) {
            memcpy(keep, runs, n * sizeof(*runs));
            memset(runs, 0, n * sizeof(*runs)); /* the plan holds its own table */
            ok &= pack_and_compare(src_dev, dst_dev, src, want, want2, got, keep, n, len, so, dof, NULL, plan);
            ok &= pack_and_compare(src_dev, dst_dev, src, want, want2, got, keep, n, len, so + 16, dof + 16, NULL,
                                   plan);
        }
        wsync_pack_cuda_plan_free(plan);
        if (!ok && bad++ > 3)
            break;
    }
    CHECK_EQ(bad, 0);
out:
    wsync_mem_cuda.free(src_dev);
    wsync_mem_cuda.free(dst_dev);
    free(src);
    free(want);
    free(want2);
    free(got);
}

/* Column slices of a [rows, 1792] bf16 matrix for 8 ranks, 20,000 runs of
 * 16 rows in one launch (the task table grows past the free jobs'), polled
 * until done; then an empty job; then the same on a stream of the caller's. */
static void one_launch_many_runs_poll_and_streams(void)
{
    enum { NRUNS = 20000, ROWS = 16, COLS_BYTES = 3584, SLICE = 448 };
    size_t src_len = (size_t)NRUNS / 8 * ROWS * COLS_BYTES, dst_len = (size_t)NRUNS * ROWS * SLICE;
    unsigned char *src = malloc(src_len), *want = malloc(dst_len), *got = malloc(dst_len), *src_dev = NULL,
                  *dst_dev = NULL;
    wsync_run2d_t *runs = malloc(NRUNS * sizeof(*runs));
    wsync_pack_job_t *job = NULL;
    int done = 0, polls = 0;
    size_t i;
    if (ngpu == 0) {
        free(src);
        free(want);
        free(got);
        free(runs);
        SKIP("no CUDA device");
    }
    CHECK(src && want && got && runs);
    CHECK_OK(wsync_mem_cuda.alloc(src_len, (void **)&src_dev));
    CHECK_OK(wsync_mem_cuda.alloc(dst_len, (void **)&dst_dev));
    if (!src || !want || !got || !runs || !src_dev || !dst_dev)
        goto out;
    fill_random(src, src_len, 8);
    CHECK_OK(wsync_mem_cuda.copy(src_dev, src, src_len));
    /* matrix m = i / 8 holds rows [16 m, 16 m + 16); run i takes rank i % 8's slice */
    for (i = 0; i < NRUNS; i++)
        runs[i] = (wsync_run2d_t){.src_off = (i / 8) * ROWS * COLS_BYTES + (i % 8) * SLICE,
                                  .src_stride = COLS_BYTES,
                                  .row_bytes = SLICE,
                                  .rows = ROWS,
                                  .dst_off = i * ROWS * SLICE};
    CHECK_OK(wsync_pack_check(runs, NRUNS, src_len, dst_len));
    gather_bytes(want, src, runs, NRUNS);
    CHECK_OK(wsync_pack_cuda_start(dst_dev, src_dev, runs, NRUNS, NULL, &job));
    memset(runs, 0, NRUNS * sizeof(*runs)); /* the job holds its own table */
    while (job && !done && polls++ < 100000000) {
        wsync_status_t st = wsync_pack_cuda_poll(job, &done);
        CHECK_OK(st);
        if (st != WSYNC_OK)
            break;
    }
    CHECK(done);
    CHECK_OK(wsync_pack_cuda_wait(job));
    CHECK_OK(wsync_mem_cuda.copy(got, dst_dev, dst_len));
    CHECK(memcmp(got, want, dst_len) == 0);

    job = NULL;
    CHECK_OK(wsync_pack_cuda_start(dst_dev, src_dev, runs, 0, NULL, &job));
    CHECK(job != NULL);
    CHECK_OK(wsync_pack_cuda_wait(job));
#if WSYNC_HAVE_CUDA
    {
        cudaStream_t s = NULL;
        unsigned char *want2 = malloc(DST_CAP + 128), *got2 = malloc(DST_CAP + 128), *want3 = malloc(DST_CAP + 128);
        wsync_run2d_t rr[16];
        uint64_t len = random_runs(rr, 16, 1);
        CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
        if (want2 && got2 && want3) { /* src_len > SRC_LEN + 64: the random runs fit */
            unsigned char *d2 = NULL;
            CHECK_OK(wsync_mem_cuda.alloc(DST_CAP + 128, (void **)&d2));
            if (d2)
                CHECK(pack_and_compare(src_dev, d2, src, want2, want3, got2, rr, 16, len, 1, 2, s, NULL));
            wsync_mem_cuda.free(d2);
        }
        cudaStreamDestroy(s);
        free(want2);
        free(got2);
        free(want3);
    }
#endif
out:
    wsync_mem_cuda.free(src_dev);
    wsync_mem_cuda.free(dst_dev);
    free(src);
    free(want);
    free(got);
    free(runs);
}

/* One plan of column slices (16-byte vectors) launched twice at once into
 * two destinations; refused at bases 8 bytes off; a plan of odd rows
 * (1-byte vectors) runs at any base; an empty plan launches and waits. */
static void plans_launch_in_flight_and_refuse_bad_bases(void)
{
    enum { SLICE = 448, STRIDE = 3584, ROWS = 40, NR = 6 };
    size_t len = (size_t)NR * ROWS * SLICE, src_len = (size_t)NR * ROWS * STRIDE;
    unsigned char *src = malloc(src_len), *want = malloc(len + 64), *got = malloc(len + 64), *src_dev = NULL,
                  *d1 = NULL, *d2 = NULL;
    wsync_run2d_t runs[NR], odd = {.src_off = 3, .src_stride = 7, .row_bytes = 3, .rows = 1000, .dst_off = 0};
    wsync_pack_plan_t *plan = NULL, *odd_plan = NULL, *empty = NULL;
    wsync_pack_job_t *j1 = NULL, *j2 = NULL;
    size_t i;
    if (ngpu == 0) {
        free(src);
        free(want);
        free(got);
        SKIP("no CUDA device");
    }
    CHECK(src && want && got);
    CHECK_OK(wsync_mem_cuda.alloc(src_len, (void **)&src_dev));
    CHECK_OK(wsync_mem_cuda.alloc(len + 64, (void **)&d1));
    CHECK_OK(wsync_mem_cuda.alloc(len + 64, (void **)&d2));
    if (!src || !want || !got || !src_dev || !d1 || !d2)
        goto out;
    fill_random(src, src_len, 12);
    CHECK_OK(wsync_mem_cuda.copy(src_dev, src, src_len));
    for (i = 0; i < NR; i++) /* rank i % 8's slice of matrix i */
        runs[i] = (wsync_run2d_t){.src_off = i * ROWS * STRIDE + (i % 8) * SLICE,
                                  .src_stride = STRIDE,
                                  .row_bytes = SLICE,
                                  .rows = ROWS,
                                  .dst_off = i * ROWS * SLICE};
    gather_bytes(want, src, runs, NR);
    CHECK_OK(wsync_pack_cuda_prepare(runs, NR, (uintptr_t)d1, (uintptr_t)src_dev, &plan));
    if (plan == NULL)
        goto out;
    CHECK_OK(wsync_pack_cuda_launch(plan, d1, src_dev, NULL, &j1));
    CHECK_OK(wsync_pack_cuda_launch(plan, d2, src_dev, NULL, &j2));
    CHECK_OK(wsync_pack_cuda_wait(j2));
    CHECK_OK(wsync_pack_cuda_wait(j1));
    CHECK_OK(wsync_mem_cuda.copy(got, d1, len));
    CHECK(memcmp(got, want, len) == 0);
    CHECK_OK(wsync_mem_cuda.copy(got, d2, len));
    CHECK(memcmp(got, want, len) == 0);
    j1 = NULL;
    CHECK_FAILS(wsync_pack_cuda_launch(plan, d1 + 8, src_dev, NULL, &j1), WSYNC_ERR_INVALID, "alignment");
    CHECK_FAILS(wsync_pack_cuda_launch(plan, d1, src_dev + 1, NULL, &j1), WSYNC_ERR_INVALID, "16k+1");
    CHECK(j1 == NULL);

    /* odd rows: every task 1 byte wide, so any base will do */
    memset(want, SENTINEL, len + 64);
    gather_bytes(want + 5, src, &odd, 1);
    CHECK_OK(wsync_mem_cuda.copy(d1, want, 5)); /* the bytes before the run */
    CHECK_OK(wsync_mem_cuda.copy(d1 + 5 + 3000, want + 5 + 3000, 64));
    CHECK_OK(wsync_pack_cuda_prepare(&odd, 1, 0, 0, &odd_plan));
    if (odd_plan) {
        CHECK_OK(wsync_pack_cuda_launch(odd_plan, d1 + 5, src_dev, NULL, &j1));
        CHECK_OK(wsync_pack_cuda_wait(j1));
        CHECK_OK(wsync_mem_cuda.copy(got, d1, 5 + 3000 + 64));
        CHECK(memcmp(got, want, 5 + 3000 + 64) == 0);
    }

    CHECK_OK(wsync_pack_cuda_prepare(runs, 0, 0, 0, &empty));
    j1 = NULL;
    if (empty) {
        CHECK_OK(wsync_pack_cuda_launch(empty, d1 + 3, src_dev + 7, NULL, &j1));
        CHECK(j1 != NULL);
        CHECK_OK(wsync_pack_cuda_wait(j1));
    }
out:
    wsync_pack_cuda_plan_free(plan);
    wsync_pack_cuda_plan_free(odd_plan);
    wsync_pack_cuda_plan_free(empty);
    wsync_mem_cuda.free(src_dev);
    wsync_mem_cuda.free(d1);
    wsync_mem_cuda.free(d2);
    free(src);
    free(want);
    free(got);
}

#if WSYNC_HAVE_CUDA
/* The batch tests' device buffers and host copies. */
static void free_batch_bufs(void *src_dev, void *dst, void *acc, void *src, void *want, void *got)
{
    wsync_mem_cuda.free(src_dev);
    wsync_mem_cuda.free(dst);
    wsync_mem_cuda.free(acc);
    free(src);
    free(want);
    free(got);
}

/* A put of a batch: its plan, its parts, its source base, key offset and sum. */
static wsync_pack_sum_put_t batch_put(const wsync_pack_plan_t *plan, const wsync_pack_part_t *parts, size_t n,
                                      const void *src, uint64_t key_off, uint64_t *hout)
{
    return (wsync_pack_sum_put_t){.plan = plan,
                                  .parts = parts,
                                  .nparts = n,
                                  .src_base = src,
                                  .key_off = key_off,
                                  .hout = hout};
}
#endif

/* Five column-slice puts (16- and 8-byte vectors, slices of different
 * widths, destinations one after another at different key offsets) as one
 * batch launch, twice with the same accumulators: every put's bytes equal
 * the byte gather and every sum the host digest of them; sum_check refuses
 * 1-byte vectors and a misaligned destination. */
#if WSYNC_HAVE_CUDA
static void a_batch_of_puts_sums_each_put(void)
{
    enum { NP = 5, ROWS = 48, STRIDE = 4096 };
    static const uint32_t slice[NP] = {448, 456, 1024, 72, 3584};
    size_t src_len = (size_t)NP * ROWS * STRIDE, at[NP + 1] = {0}, i;
    unsigned char *src = malloc(src_len), *want = NULL, *got = NULL, *src_dev = NULL, *dst = NULL;
    uint64_t *acc = NULL, *hout = NULL, sums[NP];
    wsync_pack_plan_t *plan[NP] = {NULL}, *odd = NULL;
    wsync_pack_sum_put_t puts[NP];
    wsync_pack_part_t parts[NP], bad = {.at = 0, .dst = NULL};
    wsync_run2d_t runs[NP], one = {.src_off = 3, .src_stride = 7, .row_bytes = 3, .rows = 10};
    int rep;
    if (ngpu == 0) {
        free(src);
        SKIP("no CUDA device");
    }
    for (i = 0; i < NP; i++) {
        runs[i] = (wsync_run2d_t){.src_off = i * ROWS * STRIDE + 64 * i,
                                  .src_stride = STRIDE,
                                  .row_bytes = slice[i],
                                  .rows = ROWS,
                                  .dst_off = 0};
        at[i + 1] = at[i] + (size_t)ROWS * slice[i] + 16; /* a gap of 16 sentinel bytes after each */
    }
    want = malloc(at[NP]);
    got = malloc(at[NP]);
    CHECK(src && want && got);
    CHECK_OK(wsync_mem_cuda.alloc(src_len, (void **)&src_dev));
    CHECK_OK(wsync_mem_cuda.alloc(at[NP], (void **)&dst));
    CHECK_OK(wsync_mem_cuda.alloc(4 * NP * sizeof(uint64_t), (void **)&acc));
    if (!src || !want || !got || !src_dev || !dst || !acc)
        goto out;
    hout = acc + 2 * NP;
    fill_random(src, src_len, 77);
    CHECK_OK(wsync_mem_cuda.copy(src_dev, src, src_len));
    CHECK(cudaMemset(acc, 0, 2 * NP * sizeof(uint64_t)) == cudaSuccess);
    for (i = 0; i < NP; i++) {
        CHECK_OK(wsync_pack_cuda_prepare(&runs[i], 1, (uintptr_t)(dst + at[i]), (uintptr_t)src_dev, &plan[i]));
        if (plan[i] == NULL)
            goto out;
        parts[i] = (wsync_pack_part_t){.at = 0, .dst = dst + at[i]};
        CHECK_OK(wsync_pack_cuda_sum_check(plan[i], &parts[i], 1, src_dev));
        puts[i] = batch_put(plan[i], &parts[i], 1, src_dev, 1000 * i + 8, hout + i);
    }
    for (rep = 0; rep < 2; rep++) {
        memset(want, SENTINEL, at[NP]);
        CHECK_OK(wsync_mem_cuda.copy(dst, want, at[NP]));
        for (i = 0; i < NP; i++)
            gather_bytes(want + at[i], src, &runs[i], 1);
        CHECK_OK(wsync_pack_cuda_launch_sum_batch(puts, rep == 0 ? NP : 2, acc, (unsigned int *)(acc + NP), NULL));
        if (rep == 1) /* the batch of two: the rest alone through the batch too */
            for (i = 2; i < NP; i++)
                CHECK_OK(wsync_pack_cuda_launch_sum_batch(&puts[i], 1, acc, (unsigned int *)(acc + NP), NULL));
        CHECK(cudaDeviceSynchronize() == cudaSuccess);
        CHECK_OK(wsync_mem_cuda.copy(got, dst, at[NP]));
        CHECK(memcmp(got, want, at[NP]) == 0);
        CHECK(cudaMemcpy(sums, hout, sizeof(sums), cudaMemcpyDeviceToHost) == cudaSuccess);
        for (i = 0; i < NP; i++)
            CHECK_EQ(sums[i], wsync_digest_sum(want + at[i], (size_t)ROWS * slice[i], 1000 * i + 8));
    }
    bad.dst = dst + at[0] + 8;
    CHECK_FAILS(wsync_pack_cuda_sum_check(plan[0], &bad, 1, src_dev), WSYNC_ERR_INVALID, "alignment");
    CHECK_OK(wsync_pack_cuda_prepare(&one, 1, 0, 0, &odd));
    bad.dst = dst;
    if (odd)
        CHECK_FAILS(wsync_pack_cuda_sum_check(odd, &bad, 1, src_dev), WSYNC_ERR_UNSUPPORTED, "8-byte words");
    CHECK_FAILS(wsync_pack_cuda_launch_sum_batch(puts, 0, acc, (unsigned int *)(acc + NP), NULL),
                WSYNC_ERR_INVALID, "1 to 16");
out:
    for (i = 0; i < NP; i++)
        wsync_pack_cuda_plan_free(plan[i]);
    wsync_pack_cuda_plan_free(odd);
    free_batch_bufs(src_dev, dst, acc, src, want, got);
}

/* A put of two column slices landing in two parts (the caller's tensors:
 * the second slice elsewhere) between two puts of one part, as one batch
 * launch: each part holds its slice's gather, the sentinels around them are
 * untouched, and the put's sum is the host digest of its bytes as one range;
 * sum_check refuses parts that cut a task. */
static void a_batch_put_in_parts_lands_in_each(void)
{
    enum { ROWS = 40, STRIDE = 8192, W0 = 448, W1 = 1024, GAP = 256 };
    const size_t l0 = (size_t)ROWS * W0, l1 = (size_t)ROWS * W1, src_len = 4 * (size_t)ROWS * STRIDE;
    const size_t span = l0 + GAP + l1 + GAP, side = 2 * (size_t)ROWS * W0;
    unsigned char *src = malloc(src_len), *want = malloc(span), *got = malloc(span), *src_dev = NULL, *dst = NULL;
    uint64_t *acc = NULL, sums[3];
    wsync_run2d_t two[2] =
        {{.src_off = 128, .src_stride = STRIDE, .row_bytes = W0, .rows = ROWS, .dst_off = 0},
         {.src_off = 2 * ROWS * STRIDE, .src_stride = STRIDE, .row_bytes = W1, .rows = ROWS, .dst_off = l0}},
                  single = {.src_off = ROWS * STRIDE, .src_stride = STRIDE, .row_bytes = W0, .rows = ROWS};
    wsync_pack_plan_t *plan = NULL, *plan1 = NULL;
    wsync_pack_part_t p2[2], p1[2], cut[2];
    wsync_pack_sum_put_t puts[3];
    if (ngpu == 0) {
        free(src), free(want), free(got);
        SKIP("no CUDA device");
    }
    CHECK(src && want && got);
    CHECK_OK(wsync_mem_cuda.alloc(src_len, (void **)&src_dev));
    CHECK_OK(wsync_mem_cuda.alloc(span + 2 * side, (void **)&dst));
    CHECK_OK(wsync_mem_cuda.alloc(9 * sizeof(uint64_t), (void **)&acc));
    if (!src || !want || !got || !src_dev || !dst || !acc)
        goto out;
    fill_random(src, src_len, 91);
    CHECK_OK(wsync_mem_cuda.copy(src_dev, src, src_len));
    CHECK(cudaMemset(acc, 0, 6 * sizeof(uint64_t)) == cudaSuccess);
    /* the put: slice 0 at dst, slice 1 GAP bytes after it (not where a
     * contiguous put would write it); puts of one part on either side */
    p2[0] = (wsync_pack_part_t){.at = 0, .dst = dst};
    p2[1] = (wsync_pack_part_t){.at = l0, .dst = dst + l0 + GAP};
    p1[0] = (wsync_pack_part_t){.at = 0, .dst = dst + span};
    p1[1] = (wsync_pack_part_t){.at = 0, .dst = dst + span + side};
    CHECK_OK(wsync_pack_cuda_prepare(two, 2, (uintptr_t)dst, (uintptr_t)src_dev, &plan));
    CHECK_OK(wsync_pack_cuda_prepare(&single, 1, (uintptr_t)dst, (uintptr_t)src_dev, &plan1));
    if (plan == NULL || plan1 == NULL)
        goto out;
    CHECK_OK(wsync_pack_cuda_sum_check(plan, p2, 2, src_dev));
    cut[0] = p2[0], cut[1] = (wsync_pack_part_t){.at = 64, .dst = dst + 64 + GAP};
    CHECK_FAILS(wsync_pack_cuda_sum_check(plan, cut, 2, src_dev), WSYNC_ERR_UNSUPPORTED, "part");
    puts[0] = batch_put(plan1, &p1[0], 1, src_dev, 8, acc + 6);
    puts[1] = batch_put(plan, p2, 2, src_dev, 4096, acc + 7);
    puts[2] = batch_put(plan1, &p1[1], 1, src_dev, 64, acc + 8);
    memset(want, SENTINEL, span);
    CHECK_OK(wsync_mem_cuda.copy(dst, want, span));
    gather_bytes(want, src, &two[0], 1);
    gather_bytes(want + l0 + GAP - l0, src, &two[1], 1); /* run 1 writes at its dst_off l0: part 1's place */
    CHECK_OK(wsync_pack_cuda_launch_sum_batch(puts, 3, acc, (unsigned int *)(acc + 3), NULL));
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK_OK(wsync_mem_cuda.copy(got, dst, span));
    CHECK(memcmp(got, want, span) == 0);
    CHECK(cudaMemcpy(sums, acc + 6, sizeof(sums), cudaMemcpyDeviceToHost) == cudaSuccess);
    memcpy(got, want, l0); /* the put's bytes as one range: slice 0, then slice 1 */
    memcpy(got + l0, want + l0 + GAP, l1);
    CHECK_EQ(sums[1], wsync_digest_sum(got, l0 + l1, 4096));
    gather_bytes(got, src, &single, 1);
    CHECK_EQ(sums[0], wsync_digest_sum(got, l0, 8));
    CHECK_EQ(sums[2], wsync_digest_sum(got, l0, 64));
out:
    wsync_pack_cuda_plan_free(plan);
    wsync_pack_cuda_plan_free(plan1);
    free_batch_bufs(src_dev, dst, acc, src, want, got);
}
#else
static void a_batch_of_puts_sums_each_put(void)
{
    SKIP("not built with CUDA");
}

static void a_batch_put_in_parts_lands_in_each(void)
{
    SKIP("not built with CUDA");
}
#endif

int main(void)
{
    ngpu = gpu_count();
    RUN(without_gpu_the_pack_says_why);
    RUN(gpu_gather_equals_host_gather_on_random_runs);
    RUN(one_launch_many_runs_poll_and_streams);
    RUN(plans_launch_in_flight_and_refuse_bad_bases);
    RUN(a_batch_of_puts_sums_each_put);
    RUN(a_batch_put_in_parts_lands_in_each);
    TEST_EXIT();
}
