/* gpu_fanout_bench.c: intra-node fan-out through CUDA IPC windows. A 2-rank
 * engine node (rank r on GPU r); each rank has landed half of a 4 GiB image
 * and completes it by copying the other half out of its peer's window, chunk
 * by chunk (64 MiB) on the copy engines. Measured in the same run against
 * ncclAllGather on the same buffers and against the peer-copy ceiling (one
 * bulk copy per rank, both directions at once, and one way alone). Prints
 * the per-rank received GB/s of each and the ratios. Every run's image is
 * checked against its digest. */
#include <stdint.h>

#include "common/base/util.h"

#if WSYNC_HAVE_CUDA && WSYNC_HAVE_NCCL
#include "bench/gpu_pair.h"
#include "common/window/window.h"

#define IMAGE ((size_t)4 << 30)
#define CHUNK ((size_t)64 << 20)
#define REPS 7

static size_t image_len = IMAGE;

static int ranks_main(int rank)
{
    const size_t H = image_len / 2;
    wsync_window_t w;
    wsync_blob_t mine, theirs;
    void *peer = NULL;
    char *img;
    cudaStream_t s[2];
    cudaEvent_t t0, t1;
    uint64_t ref = 0, sum = 0;
    double fan[REPS], bulk[REPS], oneway[REPS], ag[REPS];
    ncclComm_t comm;
    int i, k;
    float ms;
    size_t mine_off = rank * H, peer_off = (1 - rank) * H, off;

    if (wsync_mem_cuda.init(rank) != WSYNC_OK)
        DIE("%s", wsync_last_error());
    if (wsync_window_cuda_ipc.alloc(image_len, &w) != WSYNC_OK)
        DIE("%s", wsync_last_error());
    img = w.ptr;
    CU(cudaStreamCreateWithFlags(&s[0], cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&s[1], cudaStreamNonBlocking));
    CU(cudaEventCreate(&t0));
    CU(cudaEventCreate(&t1));
    /* The reference: the whole image as it must end up. */
    if (wsync_mem_cuda.fill(img, image_len, 0, 77) != WSYNC_OK ||
        wsync_mem_cuda.digest_sum(img, image_len, 0, &ref) != WSYNC_OK)
        DIE("%s", wsync_last_error());
    memset(&mine, 0, sizeof(mine));
    if (wsync_window_cuda_ipc.export_blob(&w, &mine) != WSYNC_OK)
        DIE("%s", wsync_last_error());
    pair_xchg(&mine, &theirs, sizeof(mine));
    if (wsync_window_cuda_ipc.map(&theirs, -1, image_len, &peer) != WSYNC_OK)
        DIE("%s", wsync_last_error());
    comm = pair_comm();

#define VERIFY(what)                                                                      \
    do {                                                                                  \
        if (wsync_mem_cuda.digest_sum(img, image_len, 0, &sum) != WSYNC_OK || sum != ref) \
            DIE("%s: the image differs from its source after the copy", what);            \
    } while (0)
#define TIMED(arr, idx, body)                            \
    do {                                                 \
        CU(cudaMemsetAsync(img + peer_off, 0, H, s[0])); \
        CU(cudaStreamSynchronize(s[0]));                 \
        pair_barrier();                                  \
        CU(cudaEventRecord(t0, s[0]));                   \
        CU(cudaStreamWaitEvent(s[1], t0, 0));            \
        body;                                            \
        CU(cudaEventRecord(t1, s[1]));                   \
        CU(cudaStreamWaitEvent(s[0], t1, 0));            \
        CU(cudaEventRecord(t1, s[0]));                   \
        CU(cudaEventSynchronize(t1));                    \
        CU(cudaEventElapsedTime(&ms, t0, t1));           \
        arr[idx] = pair_max(ms / 1e3);                   \
    } while (0)

    for (i = -1; i < REPS; i++) {
        int at = i < 0 ? 0 : i;
        /* wsync: chunk by chunk out of the peer's window, two streams */
        TIMED(fan, at, {
            for (off = 0, k = 0; off < H; off += CHUNK, k++)
                CU(cudaMemcpyAsync(img + peer_off + off, (char *)peer + peer_off + off,
                                   off + CHUNK <= H ? CHUNK : H - off, cudaMemcpyDefault, s[k & 1]));
        });
        VERIFY("fan-out");
        /* ceiling: one bulk peer copy per rank, both at once */
        TIMED(bulk, at, CU(cudaMemcpyAsync(img + peer_off, (char *)peer + peer_off, H, cudaMemcpyDefault, s[0])));
        VERIFY("bulk peer copy");
        /* one way alone: rank 0 pulls, rank 1 idles */
        TIMED(oneway, at,
              if (rank == 0)
                  CU(cudaMemcpyAsync(img + peer_off, (char *)peer + peer_off, H, cudaMemcpyDefault, s[0])));
        if (rank == 0)
            VERIFY("one-way peer copy");
        else
            CU(cudaMemcpy(img + peer_off, (char *)peer + peer_off, H, cudaMemcpyDefault));
        /* NCCL: in-place all-gather on the same image buffers */
        TIMED(ag, at, NC(ncclAllGather(img + mine_off, img, H, ncclUint8, comm, s[0])));
        VERIFY("ncclAllGather");
    }
    if (rank == 0) {
        double tf = median(fan, REPS), tb = median(bulk, REPS), to = median(oneway, REPS), ta = median(ag, REPS);
        double gb = (double)H / 1e9;
        printf("gpu_fanout_bench: image %.2f GiB, 2 ranks (GPU0, GPU1), each receives %.2f GiB, chunk %zu MiB, "
               "median of %d\n",
               (double)image_len / (1 << 30), (double)H / (1 << 30), CHUNK >> 20, REPS);
        printf("  wsync IPC fan-out (chunked)     %8.3f ms  %7.1f GB/s per rank\n", tf * 1e3, gb / tf);
        printf("  ncclAllGather (same buffers)    %8.3f ms  %7.1f GB/s per rank (time-equivalent)\n", ta * 1e3,
               gb / ta);
        printf("  ceiling: bulk peer copy, both   %8.3f ms  %7.1f GB/s per rank\n", tb * 1e3, gb / tb);
        printf("  ceiling: bulk peer copy, 1 way  %8.3f ms  %7.1f GB/s\n", to * 1e3, gb / to);
        printf("  ratio vs ncclAllGather: %.2fx (target >= 1.3)\n", ta / tf);
        printf("  ratio vs peer-copy ceiling (both ways at once): %.3f (target >= 0.95)\n", tb / tf);
        printf("  digests: every run's image equals its source\n");
    }
    ncclCommDestroy(comm);
    wsync_window_cuda_ipc.unmap(peer, image_len);
    wsync_window_cuda_ipc.free(&w);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        image_len = (size_t)strtoull(argv[1], NULL, 0) << 20; /* MiB, for a quick run */
    if (pair_gpus() < 2) {
        printf("gpu_fanout_bench: skipped: needs 2 CUDA devices\n");
        return 0;
    }
    return pair_run(ranks_main);
}

#else
#include <stdio.h>
int main(void)
{
    printf("gpu_fanout_bench: skipped: not built with CUDA and NCCL\n");
    return 0;
}
#endif
