/* pack_test.c: the host gather and the GPU task table against an independent
 * byte-by-byte gather, on random runs of every shape (short rows, long rows,
 * contiguous rows, single rows, odd sizes, odd source and destination
 * alignments, gaps between runs in the destination); the threaded gather
 * equals the single-threaded one; the checks name the bad run. The task
 * table is executed here by a CPU model of the kernel that refuses any
 * access its width does not allow, so the split the GPU runs is checked
 * without a GPU, also at other bases than it was built for, as a prepared
 * plan is launched. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/digest/digest.h"
#include "common/pack/pack.h"
#include "common/pack/pack_task.h"
#include "common/base/util.h"
#include "tests/test.h"
#include "tests/unit/common/pack/pack_random.h"

static void host_gather_equals_bytewise_on_random_runs(void)
{
    unsigned char *src0 = malloc(SRC_LEN + 64), *got0 = malloc(DST_CAP + 64), *want0 = malloc(DST_CAP + 64);
    wsync_run2d_t runs[64];
    int bad = 0, iter;
    CHECK(src0 && got0 && want0);
    if (!src0 || !got0 || !want0)
        goto out;
    wsync_fill_pattern(src0, SRC_LEN + 64, 0, 9);
    for (iter = 0; iter < 150; iter++) {
        size_t n = 1 + rnd(64), so = rnd(33), dof = rnd(33);
        const unsigned char *src = src0 + so;
        unsigned char *got = got0 + dof, *want = want0 + dof;
        uint64_t len = random_runs(runs, n, (int)rnd(2));
        if (rnd(3) == 0)
            shuffle(runs, n);
        CHECK_OK(wsync_pack_check(runs, n, SRC_LEN, DST_CAP));
        memset(got0, SENTINEL, len + dof + 64);
        memset(want0, SENTINEL, len + dof + 64);
        gather_bytes(want, src, runs, n);
        wsync_pack_host(got, src, runs, n);
        if (memcmp(got0, want0, len + dof + 64) != 0 && bad++ < 3)
            fprintf(stderr, "  iteration %d (%zu runs, source +%zu, destination +%zu) differs\n", iter, n, so, dof);
    }
    CHECK_EQ(bad, 0);
out:
    free(src0);
    free(got0);
    free(want0);
}

static void threaded_gather_equals_bytewise(void)
{
    unsigned char *src = malloc(SRC_LEN), *got = malloc(DST_CAP), *want = malloc(DST_CAP);
    wsync_run2d_t runs[200];
    int bad = 0, iter;
    CHECK(src && got && want);
    if (!src || !got || !want)
        goto out;
    wsync_fill_pattern(src, SRC_LEN, 0, 10);
    for (iter = 0; iter < 30; iter++) {
        size_t n = 1 + rnd(200);
        int threads = 1 + (int)rnd(7);
        uint64_t len = random_runs(runs, n, (int)rnd(2));
        shuffle(runs, n);
        memset(got, SENTINEL, len + 64);
        memset(want, SENTINEL, len + 64);
        gather_bytes(want, src, runs, n);
        CHECK_OK(wsync_pack_host_threads(got, src, runs, n, threads));
        if (memcmp(got, want, len + 64) != 0 && bad++ < 3)
            fprintf(stderr, "  iteration %d (%zu runs, %d threads, %llu bytes) differs\n", iter, n, threads,
                    (unsigned long long)len);
    }
    CHECK_EQ(bad, 0);
out:
    free(src);
    free(got);
    free(want);
}

/* The kernel's contract, run on the CPU: each task's rows as width-byte
 * vectors; an access the width does not allow is counted, not made. */
static uint64_t run_tasks(unsigned char *dst, const unsigned char *src, const wsync_pack_task_t *t, size_t n)
{
    uint64_t misaligned = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t w = t[i].width;
        if ((w != 1 && w != 2 && w != 4 && w != 8 && w != 16) || t[i].row_bytes % w ||
            (uint64_t)t[i].rows * t[i].row_bytes > WSYNC_PACK_TASK_BYTES || t[i].rows == 0 || t[i].row_bytes == 0) {
            misaligned++;
            continue;
        }
        for (uint32_t r = 0; r < t[i].rows; r++) {
            const unsigned char *s = src + t[i].src + r * t[i].stride;
            unsigned char *d = dst + t[i].dst + (uint64_t)r * t[i].row_bytes;
            if ((uintptr_t)s % w || (uintptr_t)d % w) {
                misaligned++;
                continue;
            }
            memcpy(d, s, t[i].row_bytes);
        }
    }
    return misaligned;
}

static void task_table_covers_runs_at_allowed_widths(void)
{
    unsigned char *src0 = malloc(SRC_LEN + 64), *got0 = malloc(DST_CAP + 64), *want0 = malloc(DST_CAP + 64);
    wsync_run2d_t runs[64];
    wsync_pack_task_t *tasks = NULL;
    int bad = 0, iter;
    CHECK(src0 && got0 && want0);
    if (!src0 || !got0 || !want0)
        goto out;
    wsync_fill_pattern(src0, SRC_LEN + 64, 0, 11);
    for (iter = 0; iter < 150; iter++) {
        size_t n = 1 + rnd(64), so = rnd(33), dof = rnd(33), nt, again;
        const unsigned char *src = src0 + so;
        unsigned char *got = got0 + dof, *want = want0 + dof;
        uint64_t len = random_runs(runs, n, (int)rnd(2));
        if (rnd(3) == 0)
            shuffle(runs, n);
        nt = wsync_pack_tasks(runs, n, (uintptr_t)got, (uintptr_t)src, NULL, 0);
        free(tasks);
        tasks = malloc((nt ? nt : 1) * sizeof(*tasks));
        if (!tasks)
            break;
        again = wsync_pack_tasks(runs, n, (uintptr_t)got, (uintptr_t)src, tasks, nt);
        CHECK_EQ(again, nt);
        memset(got0, SENTINEL, len + dof + 64);
        memset(want0, SENTINEL, len + dof + 64);
        gather_bytes(want, src, runs, n);
        if (run_tasks(got, src, tasks, nt) != 0 && bad++ < 3)
            fprintf(stderr, "  iteration %d: a task's width does not fit its addresses\n", iter);
        if (memcmp(got0, want0, len + dof + 64) != 0 && bad++ < 3)
            fprintf(stderr, "  iteration %d (%zu runs, %zu tasks) differs from the byte gather\n", iter, n, nt);
    }
    CHECK_EQ(bad, 0);
out:
    free(tasks);
    free(src0);
    free(got0);
    free(want0);
}

/* What a prepared plan (wsync_pack_cuda_prepare) relies on: the table is
 * the same for bases 16 bytes apart, and runs, every access aligned and
 * every byte right, at any bases congruent to the ones it was built for
 * modulo its widest width. */
static void table_runs_at_bases_congruent_modulo_its_width(void)
{
    unsigned char *src0 = malloc(SRC_LEN + 128), *got0 = malloc(DST_CAP + 128), *want0 = malloc(DST_CAP + 128);
    wsync_run2d_t runs[64];
    wsync_pack_task_t *t1 = NULL, *t2 = NULL;
    int bad = 0, iter;
    CHECK(src0 && got0 && want0);
    if (!src0 || !got0 || !want0)
        goto out;
    wsync_fill_pattern(src0, SRC_LEN + 128, 0, 13);
    for (iter = 0; iter < 150; iter++) {
        size_t n = 1 + rnd(64), nt, i;
        uintptr_t dm = rnd(16), sm = rnd(16), align = 1, od, os;
        unsigned char *src, *got, *want;
        uint64_t len = random_runs(runs, n, (int)rnd(2));
        nt = wsync_pack_tasks(runs, n, dm, sm, NULL, 0);
        free(t1);
        free(t2);
        t1 = malloc((nt ? nt : 1) * sizeof(*t1));
        t2 = malloc((nt ? nt : 1) * sizeof(*t2));
        if (!t1 || !t2)
            break;
        wsync_pack_tasks(runs, n, dm, sm, t1, nt);
        CHECK_EQ(wsync_pack_tasks(runs, n, dm + 16 * (1 + rnd(1000)), sm + 16 * rnd(1000), t2, nt), nt);
        if (memcmp(t1, t2, nt * sizeof(*t1)) != 0 && bad++ < 3)
            fprintf(stderr, "  iteration %d: the table changed with the bases 16 bytes on\n", iter);
        for (i = 0; i < nt; i++)
            if (t1[i].width > align)
                align = t1[i].width;
        /* 16-aligned bases, then offsets congruent to dm, sm modulo align */
        od = dm % align + align * rnd(32 / align + 1);
        os = sm % align + align * rnd(32 / align + 1);
        got = (unsigned char *)(((uintptr_t)got0 + 15) & ~(uintptr_t)15) + od;
        want = (unsigned char *)(((uintptr_t)want0 + 15) & ~(uintptr_t)15) + od;
        src = (unsigned char *)(((uintptr_t)src0 + 15) & ~(uintptr_t)15) + os;
        memset(got0, SENTINEL, len + 128);
        memset(want0, SENTINEL, len + 128);
        gather_bytes(want, src, runs, n);
        if (run_tasks(got, src, t1, nt) != 0 && bad++ < 3)
            fprintf(stderr, "  iteration %d: bases +%zu/+%zu (built for %zu/%zu, widest %zu) misalign a task\n",
                    iter, (size_t)od, (size_t)os, (size_t)dm, (size_t)sm, (size_t)align);
        if (memcmp(got0, want0, len + 128) != 0 && bad++ < 3)
            fprintf(stderr, "  iteration %d (%zu runs, %llu bytes) differs from the byte gather\n", iter, n,
                    (unsigned long long)len);
    }
    CHECK_EQ(bad, 0);
out:
    free(t1);
    free(t2);
    free(src0);
    free(got0);
    free(want0);
}

/* What the bench packs: a bf16 column slice of o_proj (3584 x 3584) for
 * rank 1 of 8 moves in 16-byte vectors only, 73 rows (64 KiB) a block; a
 * contiguous range whose source and destination agree modulo 16 but not
 * modulo 32 still moves at 16 bytes except a short head and tail. */
static void aligned_slices_move_sixteen_bytes_at_a_time(void)
{
    wsync_run2d_t r = {.src_off = 896, .src_stride = 7168, .row_bytes = 896, .rows = 3584, .dst_off = 0};
    wsync_pack_task_t t[64];
    size_t nt = wsync_pack_tasks(&r, 1, 0x10000, 0x20000, t, 64), i;
    CHECK_EQ(nt, (3584 + 72) / 73);
    for (i = 0; i < nt && i < 64; i++)
        CHECK_EQ(t[i].width, 16);
    CHECK_EQ(t[0].rows, 73);

    r = (wsync_run2d_t){.src_off = 3, .rows = 1, .row_bytes = 200000, .dst_off = 3};
    nt = wsync_pack_tasks(&r, 1, 0x10000, 0x20000, t, 64);
    /* 13-byte head, three full 64 KiB pieces and one partial body, 3-byte tail */
    CHECK_EQ(nt, 6);
    if (nt == 6) {
        CHECK_EQ(t[0].row_bytes, 13);
        CHECK_EQ(t[0].width, 1);
        CHECK_EQ(t[1].width, 16);
        CHECK_EQ(t[4].width, 16);
        CHECK_EQ(t[5].row_bytes, (200000 - 13) % 16);
    }
}

static void checks_name_the_bad_run(void)
{
    wsync_run2d_t r[3] = {
        {.src_off = 0, .src_stride = 100, .row_bytes = 50, .rows = 10, .dst_off = 0},
        {.src_off = 2000, .src_stride = 0, .row_bytes = 100, .rows = 1, .dst_off = 500},
        {.src_off = 0, .src_stride = 0, .row_bytes = 0, .rows = 0, .dst_off = 1u << 30}, /* empty: ignored */
    };
    CHECK_OK(wsync_pack_check(r, 3, 2100, 600));
    CHECK_EQ(wsync_pack_bytes(r, 3), 600);
    CHECK_FAILS(wsync_pack_check(r, 3, 2099, 600), WSYNC_ERR_INVALID, "pack run 1");
    CHECK_FAILS(wsync_pack_check(r, 3, 2100, 599), WSYNC_ERR_INVALID, "end past the destination");
    r[0].src_stride = 49;
    CHECK_FAILS(wsync_pack_check(r, 3, 1u << 20, 600), WSYNC_ERR_INVALID, "rows would overlap");
    r[0].src_stride = 100;
    r[1].dst_off = 499;
    CHECK_FAILS(wsync_pack_check(r, 3, 2100, 600), WSYNC_ERR_INVALID, "pack runs 0 and 1 both write");
    r[1].dst_off = 500;
    r[1].rows = UINT64_MAX / 2;
    CHECK_FAILS(wsync_pack_check(r, 3, 2100, 600), WSYNC_ERR_INVALID, "overflow");
}

int main(void)
{
    RUN(host_gather_equals_bytewise_on_random_runs);
    RUN(threaded_gather_equals_bytewise);
    RUN(task_table_covers_runs_at_allowed_widths);
    RUN(table_runs_at_bases_congruent_modulo_its_width);
    RUN(aligned_slices_move_sixteen_bytes_at_a_time);
    RUN(checks_name_the_bad_run);
    TEST_EXIT();
}
