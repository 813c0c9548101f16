/* pack_task.h: the GPU gather's work list. wsync_pack_cuda_prepare (and
 * wsync_pack_cuda_start) turn a put's runs into tasks of at most
 * WSYNC_PACK_TASK_BYTES each, one thread block per task, with the widest
 * load/store (16, 8, 4, 2 or 1 bytes) that every address of the task
 * allows. Kept apart from the kernel so the split is unit-tested on
 * machines without a GPU. */
#ifndef WSYNC_COMMON_PACK_TASK_H
#define WSYNC_COMMON_PACK_TASK_H

#include <stddef.h>
#include <stdint.h>

#include "common/pack/pack.h"

/* 64 KiB per block: 8 16-byte vectors per thread of 512 (two rounds of
 * four loads in flight), and a thousand blocks for a 64 MiB put, several
 * waves on an H200's 132 SMs (pack_cuda.cu has the measurements). */
#define WSYNC_PACK_TASK_BYTES (64u << 10)

/* `rows` rows of `row_bytes` bytes, row i read at src + i * stride, written
 * back to back from dst (offsets from the source and destination bases);
 * rows * row_bytes <= WSYNC_PACK_TASK_BYTES. Every source row start, every
 * destination row start, row_bytes and (with rows > 1) stride are multiples
 * of width. Same layout in C and CUDA (40 bytes). */
typedef struct wsync_pack_task {
    uint64_t src, dst, stride;
    uint32_t row_bytes, rows;
    uint32_t width, pad;
} wsync_pack_task_t;

/* Splits the runs into tasks for bases at addresses src_base and dst_base
 * (only their alignment matters), in run order. Writes at most `cap` tasks
 * into out (out may be NULL with cap 0) and returns how many the runs need:
 * call once with cap 0 to size the table. Contiguous bytes (a run of one row,
 * or rows a stride of row_bytes apart) are cut into an unaligned head, a body
 * moved at the width the source and destination share modulo 16, and a tail,
 * so only a few edge bytes move narrowly. */
size_t wsync_pack_tasks(const wsync_run2d_t *runs, size_t n, uintptr_t dst_base, uintptr_t src_base,
                        wsync_pack_task_t *out, size_t cap);

/* Can a table whose tasks write from destination offsets start[0..ntasks)
 * (ascending; the put is `len` bytes), built for a destination base at
 * 16k + dst_mod with vectors of up to `align` bytes, land in the n parts
 * (pack.h's wsync_pack_part_t)? Each part must begin where a task begins
 * (no task is cut: a block writes one base), parts[0] at 0, the rest
 * ascending and inside the put, at most WSYNC_PACK_MAX_PARTS, and each
 * part's destination aligned as the plan's base is at that offset (modulo
 * align). WSYNC_ERR_UNSUPPORTED naming the part and why, or WSYNC_OK. Pure:
 * unit-tested without a GPU. */
wsync_status_t wsync_pack_parts_check(const uint64_t *start, size_t ntasks, uint64_t len,
                                      const wsync_pack_part_t *parts, size_t n, uint32_t dst_mod, uint32_t align);

#endif
