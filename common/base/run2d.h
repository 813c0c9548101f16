/* run2d.h: the elementary byte mapping of the engine-layout plan: `rows` rows
 * of `row_bytes` bytes, row i read at src_off + i * src_stride in a trainer's
 * image and written back to back (destination rows are always contiguous) at
 * dst_off + i * row_bytes. A column slice of a row-major tensor is one run,
 * never one run per row. Shared by the target/plan code (who computes runs)
 * and the pack kernels (who execute them). */
#ifndef WSYNC_COMMON_RUN2D_H
#define WSYNC_COMMON_RUN2D_H

#include <stdint.h>

typedef struct wsync_run2d {
    uint64_t src_off;    /* trainer image offset of row 0 */
    uint64_t src_stride; /* bytes between rows (0 when rows == 1) */
    uint64_t row_bytes, rows;
    uint64_t dst_off; /* in a plan's put: offset inside the put; in wsync_target_runs: in the
                          * rank's destination image */
} wsync_run2d_t;

/* Bytes a run moves. */
static inline uint64_t wsync_run2d_bytes(const wsync_run2d_t *r)
{
    return r->row_bytes * r->rows;
}

#endif
