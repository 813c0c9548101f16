/* flat_walk.cuh: a thread's place (row r, column c) in rows of `n` items
 * read as one flat array, thread t of a block taking items t, t + step, ...
 * (consecutive threads read consecutive items of a row, whatever its
 * length): the next item's place is stepped, not divided, given step_r =
 * step / n and step_c = step % n. Used by the pack gather (pack_gather.cuh;
 * the digest of runs, digest_cuda.cu, steps its address and keys the same
 * way, by additions). A macro, not an inline function:
 * nvcc compiles the function's reference arguments into a longer loop
 * (pack_cuda.cu's PTX 592 -> 617 instructions), and the pack kernel was
 * measured as the macro compiles. CUDA only. */
#ifndef WSYNC_COMMON_BASE_FLAT_WALK_CUH
#define WSYNC_COMMON_BASE_FLAT_WALK_CUH

#define WSYNC_FLAT_STEP(r, c, n, step_r, step_c) \
    do {                                         \
        (c) += (step_c);                         \
        (r) += (step_r);                         \
        if ((c) >= (n)) {                        \
            (c) -= (n);                          \
            (r)++;                               \
        }                                        \
    } while (0)

#endif
