/* CRC kernels shared by the pylogq extensions.
 *
 * Both functions take and return the CRC in its usual (post-inverted) form, so
 * crc(0, a+b) == crc(crc(0, a), b), as zlib.crc32 and crc32c.crc32c do.
 * They never touch Python objects and may run without the GIL.
 */
#ifndef PYLOGQ_CRC_H
#define PYLOGQ_CRC_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): record batches v2. */
uint32_t pylogq_crc32c(uint32_t crc, const void *buf, size_t len);

/* CRC-32 (zlib/IEEE, reflected polynomial 0xEDB88320): message sets v0/v1. */
uint32_t pylogq_crc32(uint32_t crc, const void *buf, size_t len);

/* Name of the implementation chosen at run time for each, e.g. "sse4.2-3way". */
const char *pylogq_crc32c_impl(void);
const char *pylogq_crc32_impl(void);

/* The CRC of a+b from crc1 = CRC of a, crc2 = CRC of b and len2 = len(b),
 * as zlib's crc32_combine: no pass over the data, O(log len2). */
uint32_t pylogq_crc32c_combine(uint32_t crc1, uint32_t crc2, size_t len2);
uint32_t pylogq_crc32_combine(uint32_t crc1, uint32_t crc2, size_t len2);

/* Every implementation this build can run on this CPU, fastest first, so tests
 * can check each one and benchmarks can compare them: the name of the i-th
 * (index 0 is the one in use) and its function through *fn, or NULL past the
 * last. All take and return the CRC in the same form as pylogq_crc32c. */
typedef uint32_t (*pylogq_crc_fn)(uint32_t crc, const void *buf, size_t len);
const char *pylogq_crc32c_variant(size_t i, pylogq_crc_fn *fn);
const char *pylogq_crc32_variant(size_t i, pylogq_crc_fn *fn);

#endif
