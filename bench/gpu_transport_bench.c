/* gpu_transport_bench.c: the nccl transport moving a Qwen2.5-7B-shaped image
 * (the real tensor list: 28 layers, hidden 3584, intermediate 18944, 28 heads
 * / 4 KV heads of dim 128, vocab 152064, bf16, untied lm_head: 15.23 GB,
 * padded to 16 GiB) from GPU 0 to GPU 1 in 64 MiB chunks, in the same run
 * against:
 *   - one raw ncclSend/ncclRecv of the whole 16 GiB buffer (the ceiling);
 *   - per-tensor weight sync as RL frameworks do it: for each tensor the
 *     trainer tells the engine its name, dtype and shape (one small message),
 *     both call ncclBroadcast into a receive tensor (a reused staging buffer,
 *     as a caching allocator hands out), the engine waits for it, copies it
 *     into its parameter and acknowledges; the trainer waits for the ack
 *     before the next tensor (the per-tensor remote call it waits on);
 *   - per-tensor ncclBroadcast straight into place, back to back, no
 *     handshake (the lower bound of any per-tensor scheme);
 * plus the same transfer with every chunk digested on the GPU as it lands.
 * Times are wall clock from a barrier to the receiver holding everything. */
#include <stdint.h>

#include "common/base/util.h"

#if WSYNC_HAVE_CUDA && WSYNC_HAVE_NCCL
#include "bench/gpu_pair.h"
#include "bench/qwen7b.h"
#include "common/mem/digest_cuda.h"
#include "common/model/manifest.h"
#include "common/transport/transport.h"

#define IMAGE ((size_t)16 << 30)
#define REPS 3
#define MAXCH 4096

static size_t chunk = (size_t)64 << 20;

static double wall(void)
{
    return wsync_now_s();
}

static int ranks_main(int rank)
{
    const wsync_transport_ops_t *ops = &wsync_transport_nccl;
    wsync_transport_config_t cfg = {.device = rank, .timeout_ms = 30000, .bind_host = "127.0.0.1"};
    wsync_transport_t *t = NULL;
    wsync_region_t *r = NULL;
    wsync_conn_t *c = NULL;
    wsync_blob_t key, addr, other;
    wsync_manifest_t *m;
    char *img;
    uint64_t *dsums, *hsums, want[MAXCH], ref = 0, sum = 0;
    double tw[REPS], td[REPS], traw[REPS], tbc[REPS], tpt[REPS];
    cudaStream_t s, ds;
    char *staging = NULL;
    size_t maxt = 0;
    ncclComm_t comm;
    size_t nch = (IMAGE + chunk - 1) / chunk, i;
    int rep, dig;

    if (qwen7b_manifest(&m) != WSYNC_OK)
        DIE("%s", wsync_last_error());
    if (m->image_size > IMAGE || nch > MAXCH)
        DIE("the model (%llu bytes) does not fit the image", (unsigned long long)m->image_size);
    if (wsync_mem_cuda.init(rank) != WSYNC_OK || wsync_mem_cuda.alloc(IMAGE, (void **)&img) != WSYNC_OK)
        DIE("%s", wsync_last_error());
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&ds, cudaStreamNonBlocking));
    CU(cudaMalloc((void **)&dsums, nch * 8));
    for (i = 0; i < m->ntensors; i++)
        if (m->tensors[i].size > maxt)
            maxt = m->tensors[i].size;
    if (rank == 1)
        CU(cudaMalloc((void **)&staging, maxt));
    CU(cudaMallocHost((void **)&hsums, nch * 8));
    if (rank == 0) {
        if (wsync_mem_cuda.fill(img, IMAGE, 0, 2024) != WSYNC_OK ||
            wsync_mem_cuda.digest_sum(img, IMAGE, 0, &ref) != WSYNC_OK)
            DIE("%s", wsync_last_error());
        for (i = 0; i < nch; i++) {
            size_t len = (i + 1) * chunk <= IMAGE ? chunk : IMAGE - i * chunk;
            if (wsync_mem_cuda.digest_sum(img + i * chunk, len, i * chunk, &want[i]) != WSYNC_OK)
                DIE("%s", wsync_last_error());
        }
    }
    pair_xchg(&ref, &sum, sizeof(ref));
    if (rank == 1)
        ref = sum;
    pair_xchg(want, hsums, nch * 8);
    if (rank == 1)
        memcpy(want, hsums, nch * 8);
    comm = pair_comm();

    if (ops->open(&cfg, &t) != WSYNC_OK || ops->reg(t, img, IMAGE, WSYNC_MEM_CUDA, &r, &key) != WSYNC_OK)
        DIE("%s", wsync_last_error());
    memset(&addr, 0, sizeof(addr));
    if (rank == 1 && ops->listen(t, &addr) != WSYNC_OK)
        DIE("%s", wsync_last_error());
    pair_xchg(&addr, &other, sizeof(addr));
    if (rank == 0 && ops->connect(t, &other, 0, &c) != WSYNC_OK)
        DIE("%s", wsync_last_error());
    pair_xchg(&key, &other, sizeof(key));

#define RESET()                            \
    do {                                   \
        if (rank == 1) {                   \
            CU(cudaMemset(img, 0, IMAGE)); \
        }                                  \
        CU(cudaDeviceSynchronize());       \
        pair_barrier();                    \
    } while (0)
#define VERIFY(what)                                                                                 \
    do {                                                                                             \
        if (rank == 1 && (wsync_mem_cuda.digest_sum(img, IMAGE, 0, &sum) != WSYNC_OK || sum != ref)) \
            DIE("%s: the received image differs from the source", what);                             \
    } while (0)

    for (rep = -1; rep < REPS; rep++) {
        int at = rep < 0 ? 0 : rep;
        for (dig = 0; dig < 2; dig++) {
            double t0;
            size_t got = 0;
            RESET();
            t0 = wall();
            if (rank == 1 && dig)
                CU(cudaMemsetAsync(dsums, 0, nch * 8, ds));
            for (i = 0; i < nch; i++) {
                size_t len = (i + 1) * chunk <= IMAGE ? chunk : IMAGE - i * chunk;
                wsync_status_t st = rank == 0 ? ops->put(c, r, i * chunk, &other, i * chunk, len, i)
                                              : ops->expect(t, 0, r, i * chunk, len, i);
                if (st != WSYNC_OK)
                    DIE("%s", wsync_last_error());
            }
            if (rank == 0)
                ops->put_flush(c);
            else
                ops->expect_flush(t, 0);
            while (got < nch) {
                wsync_completion_t cs[64];
                int n = 0, k;
                if (ops->poll(t, cs, 64, &n, 30000) != WSYNC_OK || n == 0)
                    DIE("no completion in 30 s (%zu of %zu)", got, nch);
                for (k = 0; k < n; k++) {
                    if (cs[k].kind == WSYNC_COMPLETION_ERROR)
                        DIE("transfer failed: %s", cs[k].message);
                    /* digest each chunk on its own stream as soon as it lands */
                    if (rank == 1 && dig &&
                        wsync_cuda_digest_sum_async(img + cs[k].tag * chunk, cs[k].len, cs[k].tag * chunk,
                                                    dsums + cs[k].tag, ds) != 0)
                        DIE("digest launch");
                }
                got += (size_t)n;
            }
            if (rank == 1 && dig)
                CU(cudaStreamSynchronize(ds));
            (dig ? td : tw)[at] = pair_max(wall() - t0);
            VERIFY(dig ? "wsync nccl + digests" : "wsync nccl");
            if (rank == 1 && dig) {
                CU(cudaMemcpy(hsums, dsums, nch * 8, cudaMemcpyDeviceToHost));
                for (i = 0; i < nch; i++)
                    if (hsums[i] != want[i])
                        DIE("chunk %zu: GPU digest on landing differs from the sender's", i);
            }
        }
        /* raw: one ncclSend/ncclRecv of the whole buffer */
        {
            double t0;
            RESET();
            t0 = wall();
            if (rank == 0)
                NC(ncclSend(img, IMAGE, ncclUint8, 1, comm, s));
            else
                NC(ncclRecv(img, IMAGE, ncclUint8, 0, comm, s));
            CU(cudaStreamSynchronize(s));
            traw[at] = pair_max(wall() - t0);
            VERIFY("raw send/recv");
        }
        /* per-tensor broadcast of the model's tensors (the padding is not sent) */
        {
            double t0;
            RESET();
            t0 = wall();
            for (i = 0; i < m->ntensors; i++)
                NC(ncclBroadcast(img + m->tensors[i].offset, img + m->tensors[i].offset, m->tensors[i].size,
                                 ncclUint8, 0, comm, s));
            CU(cudaStreamSynchronize(s));
            tbc[at] = pair_max(wall() - t0);
        }
        /* per-tensor weight sync: metadata, broadcast into staging, wait, copy in, ack */
        {
            double t0;
            RESET();
            t0 = wall();
            for (i = 0; i < m->ntensors; i++) {
                const wsync_tensor_t *ti = &m->tensors[i];
                struct {
                    char name[160];
                    int64_t shape[WSYNC_MAX_DIMS];
                    int32_t dtype, ndim;
                    uint64_t size;
                } meta, got;
                memset(&meta, 0, sizeof(meta));
                if (rank == 0) {
                    snprintf(meta.name, sizeof(meta.name), "%s", ti->name);
                    memcpy(meta.shape, ti->shape, sizeof(meta.shape));
                    meta.dtype = (int32_t)ti->dtype;
                    meta.ndim = (int32_t)ti->ndim;
                    meta.size = ti->size;
                }
                pair_xchg(&meta, &got, sizeof(meta)); /* the engine learns what comes */
                if (rank == 0) {
                    NC(ncclBroadcast(img + ti->offset, img + ti->offset, ti->size, ncclUint8, 0, comm, s));
                } else {
                    NC(ncclBroadcast(staging, staging, got.size, ncclUint8, 0, comm, s));
                    CU(cudaStreamSynchronize(s));
                    CU(cudaMemcpyAsync(img + ti->offset, staging, got.size, cudaMemcpyDeviceToDevice, s));
                }
                CU(cudaStreamSynchronize(s));
                pair_barrier(); /* the engine's ack */
            }
            tpt[at] = pair_max(wall() - t0);
        }
    }
    if (rank == 0) {
        double a = median(tw, REPS), d = median(td, REPS), w = median(traw, REPS), b = median(tbc, REPS);
        double pt = median(tpt, REPS);
        double gb = (double)IMAGE / 1e9, mgb = (double)m->image_size / 1e9;
        printf("gpu_transport_bench: Qwen2.5-7B shape, %zu tensors, %.2f GB of bf16 (image padded to %.2f GB = 16 "
               "GiB), "
               "GPU0 -> GPU1, chunk %zu MiB, median of %d\n",
               m->ntensors, mgb, gb, chunk >> 20, REPS);
        printf("  wsync nccl transport            %8.2f ms  %7.1f GB/s\n", a * 1e3, gb / a);
        printf("  wsync nccl + GPU digest/chunk   %8.2f ms  %7.1f GB/s  (digest cost %+.1f%%)\n", d * 1e3, gb / d,
               100.0 * (d - a) / a);
        printf("  raw ncclSend/Recv, one buffer   %8.2f ms  %7.1f GB/s\n", w * 1e3, gb / w);
        printf("  per-tensor ncclBroadcast        %8.2f ms  %7.1f GB/s (model bytes only: %.1f GB/s)\n", b * 1e3,
               gb / b, mgb / b);
        printf("  per-tensor weight sync           %8.2f ms  %7.1f GB/s of model (metadata, broadcast, copy in, "
               "ack)\n",
               pt * 1e3, mgb / pt);
        printf("  ratio vs raw: %.3f (target >= 0.95)\n", w / a);
        printf("  ratio vs per-tensor weight sync: %.2fx (target >= 5)\n", pt / a);
        printf("  ratio vs per-tensor broadcast, back to back: %.2fx\n", b / a);
        printf("  digests: every received image equals its source; per-chunk GPU digests equal the sender's\n");
    }
    if (c)
        ops->disconnect(c);
    ops->dereg(r);
    ops->close(t);
    ncclCommDestroy(comm);
    cudaFree(staging);
    wsync_manifest_free(m);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        chunk = (size_t)strtoull(argv[1], NULL, 0) << 20; /* chunk MiB */
    if (pair_gpus() < 2) {
        printf("gpu_transport_bench: skipped: needs 2 CUDA devices\n");
        return 0;
    }
    return pair_run(ranks_main);
}

#else
#include <stdio.h>
int main(void)
{
    printf("gpu_transport_bench: skipped: not built with CUDA and NCCL\n");
    return 0;
}
#endif
