/* host_copy.c: wsync_host_copy. A large memcpy also streams its stores, but
 * it leaves the reads to the hardware prefetcher, which stops at every
 * 4 KiB page boundary. Shared memory windows (memfd) are backed by 4 KiB
 * pages wherever shmem huge pages are off (the default), so copying out of
 * a peer's window ran at ~0.8 of a memcpy between private buffers. Touching
 * each line eight pages ahead keeps the reads streaming: on the 2-core
 * development box (AMD EPYC) 14.5 GB/s out of a window against memcpy's
 * 10.5-12 GB/s (bench/shm_fanout_bench). */
#include "common/mem/host_copy.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define STREAM_MIN (256u << 10)
#define PAGE 4096u
#define AHEAD (8 * PAGE)

__attribute__((target("avx2"))) static void stream_copy_avx2(char *d, const char *s, size_t len)
{
    size_t head = (64 - ((uintptr_t)d & 63)) & 63, o, k;
    memcpy(d, s, head);
    d += head;
    s += head;
    len -= head;
    for (o = 0; o + PAGE <= len; o += PAGE) {
        /* Prefetching past the end of the source never faults. */
        for (k = 0; k < PAGE; k += 64)
            _mm_prefetch(s + o + AHEAD + k, _MM_HINT_NTA);
        for (k = 0; k < PAGE; k += 128) {
            __m256i a = _mm256_loadu_si256((const __m256i *)(s + o + k));
            __m256i b = _mm256_loadu_si256((const __m256i *)(s + o + k + 32));
            __m256i c = _mm256_loadu_si256((const __m256i *)(s + o + k + 64));
            __m256i e = _mm256_loadu_si256((const __m256i *)(s + o + k + 96));
            _mm256_stream_si256((__m256i *)(d + o + k), a);
            _mm256_stream_si256((__m256i *)(d + o + k + 32), b);
            _mm256_stream_si256((__m256i *)(d + o + k + 64), c);
            _mm256_stream_si256((__m256i *)(d + o + k + 96), e);
        }
    }
    _mm_sfence(); /* streamed stores are visible before the copy returns */
    memcpy(d + o, s + o, len - o);
}

void wsync_host_copy(void *dst, const void *src, size_t len)
{
    static int avx2 = -1;
    int have = __atomic_load_n(&avx2, __ATOMIC_RELAXED);
    if (have < 0) {
        have = __builtin_cpu_supports("avx2") ? 1 : 0;
        __atomic_store_n(&avx2, have, __ATOMIC_RELAXED);
    }
    if (len >= STREAM_MIN && have)
        stream_copy_avx2(dst, src, len);
    else
        memcpy(dst, src, len);
}
