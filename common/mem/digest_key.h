/* digest_key.h: a digest range cut into parts. The digest (digest.h) keys
 * each word by its position through fmix64, a bijection, so the key of
 * word `word` of a range keyed at `key` can be given as the key of a range
 * of its own: the parts' sums, each keyed so, add up to the range's. Used
 * where bytes of one range are read or written in several memories (the
 * caller's tensors and the image: engine_side/dests_digest.c; a local put
 * cut by the receiver's redirect: common/transport/local_redirect.c). */
#ifndef WSYNC_COMMON_MEM_DIGEST_KEY_H
#define WSYNC_COMMON_MEM_DIGEST_KEY_H

#include <stdint.h>

uint64_t wsync_digest_key_at(uint64_t key, uint64_t word);
/* The offset whose base key (wsync_digest_base_key) is `base`: a run of
 * words keyed base, base + G, ... is wsync_digest_sum(p, len, that offset),
 * the fastest sum this CPU runs. */
uint64_t wsync_digest_off_of_base(uint64_t base);

#endif
