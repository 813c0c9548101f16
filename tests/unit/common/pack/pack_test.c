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

/* The kernel's contract when the put's destination is cut in parts: each
 * task writes from its part's base (the part its first byte is in). */
static uint64_t run_tasks_in_parts(const wsync_pack_part_t *parts, size_t np, const unsigned char *src,
                                   const wsync_pack_task_t *t, size_t n)
{
    uint64_t misaligned = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = np - 1;
        while (j > 0 && parts[j].at > t[i].dst)
            j--;
        misaligned += run_tasks((unsigned char *)parts[j].dst - parts[j].at, src, &t[i], 1);
    }
    return misaligned;
}

/* A packed put whose destination is cut in parts at run edges (a
 * receiver's redirect: each tensor elsewhere) fits its table, and the tasks
 * run into the parts land every byte where the parts say, aligned; a cut
 * inside a task, a part aligned otherwise, parts out of order and too
 * many parts are refused, each naming why. */
static void tasks_land_in_parts_cut_at_run_edges(void)
{
    enum { ALIGN_PAD = 64 };
    unsigned char *src = malloc(SRC_LEN), *want = malloc(DST_CAP), *buf[WSYNC_PACK_MAX_PARTS] = {0};
    wsync_run2d_t runs[64];
    wsync_pack_task_t *t = NULL;
    uint64_t *start = NULL;
    int bad = 0, iter;
    CHECK(src && want);
    if (!src || !want)
        goto out;
    wsync_fill_pattern(src, SRC_LEN, 0, 14);
    for (iter = 0; iter < 100 && bad == 0; iter++) {
        const size_t n = 2 + rnd(40), dm = 8 * rnd(2);
        uint64_t len = random_runs(runs, n, (int)rnd(2)), first = runs[0].dst_off;
        wsync_pack_part_t parts[WSYNC_PACK_MAX_PARTS];
        size_t nt, np = 1, i;
        uint32_t align = 1;
        for (i = 0; i < n; i++) /* the put starts at its first run */
            runs[i].dst_off -= first;
        len -= first;
        nt = wsync_pack_tasks(runs, n, dm, 0, NULL, 0);
        free(t);
        free(start);
        t = malloc(nt * sizeof(*t));
        start = malloc(nt * sizeof(*start));
        if (!t || !start)
            break;
        wsync_pack_tasks(runs, n, dm, 0, t, nt);
        for (i = 0; i < nt; i++) {
            start[i] = t[i].dst;
            align = t[i].width > align ? t[i].width : align;
        }
        parts[0].at = 0;
        for (i = 1; i < n && np < WSYNC_PACK_MAX_PARTS; i++)
            if (rnd(2) && runs[i].rows && runs[i].row_bytes && runs[i].dst_off > parts[np - 1].at)
                parts[np++].at = runs[i].dst_off;
        memset(want, SENTINEL, len);
        gather_bytes(want, src, runs, n);
        for (i = 0; i < np; i++) { /* each part's memory placed as the put's byte at would be: 16k + dm + at */
            const uint64_t end = i + 1 < np ? parts[i + 1].at : len;
            buf[i] = malloc(end - parts[i].at + ALIGN_PAD);
            if (!buf[i])
                goto out;
            parts[i].dst = (unsigned char *)(((uintptr_t)buf[i] + 15) & ~(uintptr_t)15) + (dm + parts[i].at) % 16;
            memset(parts[i].dst, SENTINEL, end - parts[i].at);
        }
        if (wsync_pack_parts_check(start, nt, len, parts, np, (uint32_t)dm, align) != WSYNC_OK && bad++ < 3)
            fprintf(stderr, "  iteration %d: %s\n", iter, wsync_last_error());
        if (run_tasks_in_parts(parts, np, src, t, nt) != 0 && bad++ < 3)
            fprintf(stderr, "  iteration %d: a task's access is misaligned in its part\n", iter);
        for (i = 0; i < np; i++) {
            const uint64_t end = i + 1 < np ? parts[i + 1].at : len;
            if (memcmp(parts[i].dst, want + parts[i].at, end - parts[i].at) != 0 && bad++ < 3)
                fprintf(stderr, "  iteration %d: part %zu of %zu differs from the byte gather\n", iter, i, np);
            free(buf[i]);
            buf[i] = NULL;
        }
    }
    CHECK_EQ(bad, 0);
    { /* refusals: one run of 3 x 64 KiB contiguous, tasks at 0, 64 Ki, 128 Ki */
        wsync_run2d_t r = {.src_off = 0, .rows = 1, .row_bytes = 3u << 16, .dst_off = 0};
        wsync_pack_task_t tt[8];
        uint64_t st[8];
        static char mem[1 << 10] __attribute__((aligned(16)));
        wsync_pack_part_t p[3] = {{0, mem}, {1u << 16, mem + 256}, {2u << 16, mem + 512}}, many[40];
        size_t k, ntt = wsync_pack_tasks(&r, 1, 0, 0, tt, 8);
        CHECK_EQ(ntt, 3);
        for (k = 0; k < ntt && k < 8; k++)
            st[k] = tt[k].dst;
        CHECK_OK(wsync_pack_parts_check(st, ntt, 3u << 16, p, 3, 0, 16));
        p[1].at = 1000;
        CHECK_FAILS(wsync_pack_parts_check(st, ntt, 3u << 16, p, 3, 0, 16), WSYNC_ERR_UNSUPPORTED, "inside a task");
        p[1].at = 1u << 16;
        p[2].dst = mem + 520;
        CHECK_FAILS(wsync_pack_parts_check(st, ntt, 3u << 16, p, 3, 0, 16), WSYNC_ERR_UNSUPPORTED,
                    "lands at 16k+8 where its plan moves 16-byte vectors from 16k+0");
        p[2].dst = mem + 512;
        p[2].at = 1u << 16;
        CHECK_FAILS(wsync_pack_parts_check(st, ntt, 3u << 16, p, 3, 0, 16), WSYNC_ERR_UNSUPPORTED, "ascend");
        for (k = 0; k < 40; k++)
            many[k] = (wsync_pack_part_t){k * 16, mem + k * 16};
        CHECK_FAILS(wsync_pack_parts_check(st, ntt, 3u << 16, many, 40, 0, 16), WSYNC_ERR_UNSUPPORTED, "1 to 32");
        many[0].at = 8;
        CHECK_FAILS(wsync_pack_parts_check(st, ntt, 3u << 16, many, 1, 0, 16), WSYNC_ERR_UNSUPPORTED, "not 0");
    }
out:
    for (int i = 0; i < WSYNC_PACK_MAX_PARTS; i++)
        free(buf[i]);
    free(t);
    free(start);
    free(src);
    free(want);
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
    RUN(tasks_land_in_parts_cut_at_run_edges);
    RUN(checks_name_the_bad_run);
    TEST_EXIT();
}
