/* MurmurHash3_x64_128, the key digest of the compaction offset map.
 *
 * Austin Appleby's public-domain algorithm, read in little-endian order on any
 * host so every machine computes the same digest. The 16 digest bytes are h1
 * then h2, each little-endian: the bytes of mmh3.hash_bytes(key, seed). It
 * never touches Python objects and may run without the GIL.
 */
#ifndef PYLOGQ_MURMUR3_H
#define PYLOGQ_MURMUR3_H

#include <stddef.h>
#include <stdint.h>

/* The two 64-bit halves of the digest of key[0:len] into out[0] (h1), out[1] (h2). */
void pylogq_murmur3_x64_128(const void *key, size_t len, uint32_t seed, uint64_t out[2]);

#endif
