/* digest_runs_test.c: the digest-runs task table, run on the host, gives
 * every segment the word sum of its runs packed byte by byte and digested
 * the plain way, on random segments of every run shape (column slices, long
 * strided rows, rows past a task's size cut into 4 KiB rows, contiguous
 * blocks merged, empty runs); tasks stay near their size and take as many
 * whole rows as fit; runs that are not whole words are refused, naming the
 * segment. */
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "tests/test.h"
#include "tests/unit/common/mem/digest_runs_random.h"

static unsigned char *src, *buf;
static wsync_run2d_t runs[DR_MAX_RUNS];
static wsync_digest_seg_t segs[64];

static void host_tasks_equal_pack_then_digest(void)
{
    int round;
    for (round = 0; round < 60; round++) {
        size_t n = dr_random_segments(segs, 64, runs), nt = 0, i;
        wsync_digest_task_t *t = NULL;
        uint64_t sums[64] = {0};
        CHECK_OK(wsync_digest_tasks(segs, n, &t, &nt));
        wsync_digest_tasks_host(t, nt, src, sums);
        for (i = 0; i < n; i++)
            if (sums[i] != dr_reference_sum(&segs[i], src, buf)) {
                fprintf(stderr, "  round %d segment %zu of %zu differs\n", round, i, n);
                CHECK(0);
                break;
            }
        free(t);
    }
}

static void tasks_stay_near_their_size_and_rows_are_cut(void)
{
    wsync_run2d_t r[3] = {
        {.src_off = 0, .src_stride = 7168, .row_bytes = 3584, .rows = 800, .dst_off = 0}, /* a column slice */
        {.src_off = 8, .row_bytes = 1 << 20, .rows = 1, .dst_off = 2867200},              /* a long block */
        {.src_off = 0, .src_stride = 65536, .row_bytes = 40960, .rows = 2, .dst_off = 2867200 + (1 << 20)},
    };
    wsync_digest_seg_t s = {.dst_off = 4096, .runs = r, .nruns = 3};
    wsync_digest_task_t *t = NULL;
    size_t nt = 0, i;
    uint64_t words = 0, sum = 0;
    CHECK_OK(wsync_digest_tasks(&s, 1, &t, &nt));
    for (i = 0; i < nt; i++) {
        CHECK((uint64_t)t[i].row_words * 8 * t[i].nrows <= (256u << 10));
        CHECK(t[i].row_words * 8 <= (128u << 10)); /* longer rows are cut */
        words += (uint64_t)t[i].row_words * t[i].nrows;
    }
    CHECK_EQ(words, (2867200 + (1 << 20) + 2 * 40960) / 8);
    /* as many whole rows as fit a task: 800 of 3584 bytes 36 a task (23), the 1 MiB block as 4 KiB rows 32 a
     * task (8), the two of 40960 bytes in one */
    CHECK_EQ(nt, 23 + 8 + 1);
    wsync_digest_tasks_host(t, nt, src, &sum);
    CHECK(sum == dr_reference_sum(&s, src, buf));
    free(t);
}

/* Segments summed two ways (the record's and a put's digests from one
 * read): every sum equals the reference's, shared sums and second keys. */
static void host_tasks_sum_two_ways(void)
{
    int round;
    for (round = 0; round < 40; round++) {
        size_t n = dr_random_segments(segs, 64, runs), nt = 0, ns = 0;
        wsync_digest_seg2_t s2[64];
        wsync_digest_task_t *t = NULL;
        uint64_t sums[128] = {0};
        dr_two_way(segs, n, s2, &ns);
        CHECK_OK(wsync_digest_tasks2(s2, n, &t, &nt));
        wsync_digest_tasks_host(t, nt, src, sums);
        CHECK(dr_two_way_differs(s2, n, ns, sums, src, buf, round) < 0);
        free(t);
    }
}

static void runs_that_are_not_whole_words_are_refused(void)
{
    wsync_run2d_t r[2] = {{.src_off = 0, .row_bytes = 16, .rows = 1}, {.src_off = 3, .row_bytes = 8, .rows = 1}};
    wsync_digest_seg_t s[2] = {{.dst_off = 0, .runs = r, .nruns = 1}, {.dst_off = 64, .runs = r + 1, .nruns = 1}};
    wsync_digest_task_t *t = NULL;
    size_t nt = 0;
    CHECK(wsync_digest_runs_ok(r, 1));
    CHECK(!wsync_digest_runs_ok(r + 1, 1));
    CHECK_FAILS(wsync_digest_tasks(s, 2, &t, &nt), WSYNC_ERR_INVALID, "segment 1");
    CHECK(t == NULL);
    r[1].src_off = 8;
    r[1].row_bytes = 12;
    CHECK(!wsync_digest_runs_ok(r + 1, 1));
    r[1].row_bytes = 8;
    r[1].rows = 2;
    r[1].src_stride = 20;
    CHECK(!wsync_digest_runs_ok(r + 1, 1));
}

int main(void)
{
    if (!dr_buffers(&src, &buf))
        return 1;
    RUN(host_tasks_equal_pack_then_digest);
    RUN(host_tasks_sum_two_ways);
    RUN(tasks_stay_near_their_size_and_rows_are_cut);
    RUN(runs_that_are_not_whole_words_are_refused);
    free(src);
    free(buf);
    TEST_EXIT();
}
