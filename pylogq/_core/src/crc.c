/* CRC-32C and CRC-32 for the pylogq kernels, with run-time CPU dispatch.
 *
 * Every implementation works on the raw register (the pre- and post-inversion
 * are done once, in the public entry points), so the pieces compose: a long
 * input can be folded with carry-less multiplies, its last bytes finished by a
 * table or by the crc32 instruction, and independent streams combined with a
 * "zeros operator" (multiplication by x^(8n) mod P).
 *
 * Implementations, fastest first:
 *   CRC-32C  avx512-vpclmulqdq  4 x 512-bit folding, Barrett reduction; inputs
 *                               under FOLD512_MIN bytes take the sse4.2 path
 *            sse4.2-3way        crc32 instruction on three independent streams
 *                               (3 x 8 KB, then 3 x 256 B), joined with shift
 *                               tables: the instruction has a latency of three
 *                               cycles and a throughput of one per cycle
 *            slicing-by-8       portable, eight 1 KB tables
 *   CRC-32   avx512-vpclmulqdq  as above, with the IEEE constants
 *            pclmulqdq          4 x 128-bit folding, Barrett reduction
 *            slicing-by-8
 *
 * The folding constants are x^n mod P, bit-reflected, for the fold distances
 * 2048, 512 and 128 bits (x^(D+32) and x^(D-32)), x^64 mod P for the 64-bit
 * step, then P and floor(x^64 / P) for Barrett; the values for the IEEE
 * polynomial are those of the Intel white paper "Fast CRC Computation for
 * Generic Polynomials Using PCLMULQDQ".
 *
 * Tables and the dispatch pointers are set by a constructor that runs while
 * the shared object is loaded, before any caller can reach them: no lock, and
 * every later read sees finished tables.
 */
#include "crc.h"

#include <string.h>

#define POLY_32C 0x82F63B78u
#define POLY_32 0xEDB88320u

/* PYLOGQ_CRC_PORTABLE builds only the table paths (to check they compile everywhere). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(PYLOGQ_CRC_PORTABLE)
#define PYLOGQ_CRC_X86 1
#include <immintrin.h>
#endif

/* ---------------------------------------------------------------------------
 * GF(2) arithmetic modulo P, in the reflected representation: bit 31 is x^0.
 */

static uint32_t multmodp(uint32_t a, uint32_t b, uint32_t poly)
{
    uint32_t m = (uint32_t)1 << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0)
                break;
        }
        m >>= 1;
        b = (b & 1) ? (b >> 1) ^ poly : b >> 1;
    }
    return p;
}

/* x^(2^n) mod P for n = 0..31, so x^(8 len) mod P takes one product per set bit. */
static uint32_t x2n_32c[32], x2n_32[32];

static void x2n_init(uint32_t *x2n, uint32_t poly)
{
    uint32_t p = (uint32_t)1 << 30; /* x^1 */
    x2n[0] = p;
    for (int n = 1; n < 32; n++)
        x2n[n] = p = multmodp(p, p, poly);
}

/* x^(8 len) mod P: the operator that runs a CRC register through len zero bytes. */
static uint32_t zeros_op(const uint32_t *x2n, size_t len, uint32_t poly)
{
    uint32_t p = (uint32_t)1 << 31; /* x^0 */
    unsigned k = 3;
    while (len) {
        if (len & 1)
            p = multmodp(x2n[k & 31], p, poly);
        len >>= 1;
        k++;
    }
    return p;
}

uint32_t pylogq_crc32c_combine(uint32_t crc1, uint32_t crc2, size_t len2)
{
    return multmodp(zeros_op(x2n_32c, len2, POLY_32C), crc1, POLY_32C) ^ crc2;
}

uint32_t pylogq_crc32_combine(uint32_t crc1, uint32_t crc2, size_t len2)
{
    return multmodp(zeros_op(x2n_32, len2, POLY_32), crc1, POLY_32) ^ crc2;
}

/* ---------------------------------------------------------------------------
 * Slicing-by-8: t[k][b] is the register after byte b followed by k zero bytes.
 */

static uint32_t slice_32c[8][256], slice_32[8][256];

static void slice_init(uint32_t t[8][256], uint32_t poly)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (poly & (0u - (c & 1)));
        t[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int k = 1; k < 8; k++)
            t[k][n] = (t[k - 1][n] >> 8) ^ t[0][t[k - 1][n] & 0xff];
}

static inline uint64_t load_le64(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}

static uint32_t slice8(uint32_t t[8][256], uint32_t crc, const unsigned char *p, size_t len)
{
    while (len >= 8) {
        uint64_t w = load_le64(p) ^ crc;
        crc = t[7][w & 0xff] ^ t[6][(w >> 8) & 0xff] ^ t[5][(w >> 16) & 0xff] ^
              t[4][(w >> 24) & 0xff] ^ t[3][(w >> 32) & 0xff] ^ t[2][(w >> 40) & 0xff] ^
              t[1][(w >> 48) & 0xff] ^ t[0][w >> 56];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xff];
    return crc;
}

static uint32_t crc32c_slice8(uint32_t crc, const void *buf, size_t len)
{
    return ~slice8(slice_32c, ~crc, buf, len);
}

static uint32_t crc32_slice8(uint32_t crc, const void *buf, size_t len)
{
    return ~slice8(slice_32, ~crc, buf, len);
}

#ifdef PYLOGQ_CRC_X86

/* ---------------------------------------------------------------------------
 * SSE4.2: the crc32 instruction, three streams at a time.
 */

#define TARGET_SSE42 __attribute__((target("sse4.2")))
#define TARGET_PCLMUL __attribute__((target("sse4.2,pclmul")))
#define TARGET_AVX512 __attribute__((target("sse4.2,pclmul,avx512f,avx512vl,vpclmulqdq")))

enum { LONG_BLOCK = 8192, SHORT_BLOCK = 256 };

/* Zeros operators for LONG_BLOCK and SHORT_BLOCK bytes, one table per byte of the register. */
static uint32_t shift_long[4][256], shift_short[4][256];

static void shift_init(uint32_t t[4][256], size_t len)
{
    uint32_t op = zeros_op(x2n_32c, len, POLY_32C);
    for (uint32_t n = 0; n < 256; n++)
        for (int k = 0; k < 4; k++)
            t[k][n] = multmodp(op, n << (8 * k), POLY_32C);
}

static inline uint32_t shift(uint32_t t[4][256], uint32_t crc)
{
    return t[0][crc & 0xff] ^ t[1][(crc >> 8) & 0xff] ^ t[2][(crc >> 16) & 0xff] ^ t[3][crc >> 24];
}

static inline uint64_t load64(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

/* Raw register over len bytes, one stream (short inputs and tails). */
TARGET_SSE42 static uint32_t crc32c_sse42_serial(uint32_t crc, const unsigned char *p, size_t len)
{
    uint64_t c = crc;
    while (len >= 8) {
        c = _mm_crc32_u64(c, load64(p));
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    if (len & 4) {
        uint32_t w;
        memcpy(&w, p, 4);
        c32 = _mm_crc32_u32(c32, w);
        p += 4;
    }
    if (len & 2) {
        uint16_t w;
        memcpy(&w, p, 2);
        c32 = _mm_crc32_u16(c32, w);
        p += 2;
    }
    if (len & 1)
        c32 = _mm_crc32_u8(c32, *p);
    return c32;
}

/* Raw register over n blocks of 3 x block bytes, three streams joined by the shift table. */
#define THREE_WAY(block, table)                                                                    \
    while (len >= 3 * (size_t)(block)) {                                                           \
        uint64_t c1 = 0, c2 = 0;                                                                   \
        const unsigned char *end = p + (block);                                                    \
        do {                                                                                       \
            c0 = _mm_crc32_u64(c0, load64(p));                                                     \
            c1 = _mm_crc32_u64(c1, load64(p + (block)));                                           \
            c2 = _mm_crc32_u64(c2, load64(p + 2 * (block)));                                       \
            p += 8;                                                                                \
        } while (p < end);                                                                         \
        c0 = shift(table, (uint32_t)c0) ^ (uint32_t)c1;                                            \
        c0 = shift(table, (uint32_t)c0) ^ (uint32_t)c2;                                            \
        p += 2 * (size_t)(block);                                                                  \
        len -= 3 * (size_t)(block);                                                                \
    }

TARGET_SSE42 static uint32_t crc32c_sse42_raw(uint32_t crc, const unsigned char *p, size_t len)
{
    uint64_t c0 = crc;
    /* Align the three streams' loads to 8 bytes. */
    while (len && ((uintptr_t)p & 7)) {
        c0 = _mm_crc32_u8((uint32_t)c0, *p++);
        len--;
    }
    THREE_WAY(LONG_BLOCK, shift_long)
    THREE_WAY(SHORT_BLOCK, shift_short)
    return crc32c_sse42_serial((uint32_t)c0, p, len);
}

static uint32_t crc32c_sse42(uint32_t crc, const void *buf, size_t len)
{
    if (len < 3 * SHORT_BLOCK)
        return ~crc32c_sse42_serial(~crc, buf, len);
    return ~crc32c_sse42_raw(~crc, buf, len);
}

/* ---------------------------------------------------------------------------
 * Folding with carry-less multiplication (PCLMULQDQ), any reflected polynomial.
 */

struct fold_consts {
    uint64_t fold2048[2]; /* x^(2048+32), x^(2048-32) mod P */
    uint64_t fold512[2];  /* x^(512+32), x^(512-32) */
    uint64_t fold128[2];  /* x^(128+32), x^(128-32) */
    uint64_t fold64[2];   /* x^64, unused */
    uint64_t barrett[2];  /* P, floor(x^64 / P) */
};

static const struct fold_consts K32C = {
    {0x0dcb17aa4, 0x0b9e02b86},
    {0x0740eef02, 0x09e4addf8},
    {0x0f20c0dfe, 0x14cd00bd6},
    {0x0dd45aab8, 0},
    {0x105ec76f1, 0x0dea713f1},
};

static const struct fold_consts K32 = {
    {0x11542778a, 0x1322d1430},
    {0x154442bd4, 0x1c6e41596},
    {0x1751997d0, 0x0ccaa009e},
    {0x163cd6124, 0},
    {0x1db710641, 0x1f7011641},
};

static inline __m128i load_consts(const uint64_t k[2])
{
    return _mm_loadu_si128((const __m128i *)k);
}

TARGET_PCLMUL static inline __m128i fold128(__m128i x, __m128i k, __m128i data)
{
    __m128i lo = _mm_clmulepi64_si128(x, k, 0x00);
    __m128i hi = _mm_clmulepi64_si128(x, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(lo, hi), data);
}

/* Fold the remaining 16-byte chunks into x, then reduce it to the raw register.
 * len is a multiple of 16. */
TARGET_PCLMUL static uint32_t fold_finish(const struct fold_consts *k, __m128i x,
                                          const unsigned char *p, size_t len)
{
    __m128i k128 = load_consts(k->fold128);
    for (; len >= 16; p += 16, len -= 16)
        x = fold128(x, k128, _mm_loadu_si128((const __m128i *)p));

    /* 128 -> 64 bits. */
    __m128i mask32 = _mm_setr_epi32(~0, 0, ~0, 0);
    __m128i t = _mm_clmulepi64_si128(x, k128, 0x10);
    x = _mm_xor_si128(_mm_srli_si128(x, 8), t);
    t = _mm_srli_si128(x, 4);
    x = _mm_clmulepi64_si128(_mm_and_si128(x, mask32), load_consts(k->fold64), 0x00);
    x = _mm_xor_si128(x, t);

    /* Barrett reduction to 32 bits. */
    __m128i b = load_consts(k->barrett);
    t = _mm_clmulepi64_si128(_mm_and_si128(x, mask32), b, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, mask32), b, 0x00);
    x = _mm_xor_si128(x, t);
    return (uint32_t)_mm_extract_epi32(x, 1);
}

/* Raw register over len bytes; len >= 64 and a multiple of 16. */
TARGET_PCLMUL static uint32_t fold_sse(const struct fold_consts *k, uint32_t crc,
                                       const unsigned char *p, size_t len)
{
    __m128i x0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi32_si128((int)crc));
    __m128i x1 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 48));
    p += 64;
    len -= 64;
    __m128i k512 = load_consts(k->fold512);
    for (; len >= 64; p += 64, len -= 64) {
        x0 = fold128(x0, k512, _mm_loadu_si128((const __m128i *)p));
        x1 = fold128(x1, k512, _mm_loadu_si128((const __m128i *)(p + 16)));
        x2 = fold128(x2, k512, _mm_loadu_si128((const __m128i *)(p + 32)));
        x3 = fold128(x3, k512, _mm_loadu_si128((const __m128i *)(p + 48)));
    }
    __m128i k128 = load_consts(k->fold128);
    x0 = fold128(x0, k128, x1);
    x0 = fold128(x0, k128, x2);
    x0 = fold128(x0, k128, x3);
    return fold_finish(k, x0, p, len);
}

TARGET_AVX512 static inline __m512i fold512(__m512i x, __m512i k, __m512i data)
{
    __m512i lo = _mm512_clmulepi64_epi128(x, k, 0x00);
    __m512i hi = _mm512_clmulepi64_epi128(x, k, 0x11);
    return _mm512_ternarylogic_epi64(lo, hi, data, 0x96);
}

enum { FOLD512_MIN = 256 };

/* Raw register over len bytes; len >= FOLD512_MIN and a multiple of 16. */
TARGET_AVX512 static uint32_t fold_avx512(const struct fold_consts *k, uint32_t crc,
                                          const unsigned char *p, size_t len)
{
    __m512i x0 = _mm512_xor_si512(_mm512_loadu_si512(p),
                                  _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)crc)));
    __m512i x1 = _mm512_loadu_si512(p + 64);
    __m512i x2 = _mm512_loadu_si512(p + 128);
    __m512i x3 = _mm512_loadu_si512(p + 192);
    p += 256;
    len -= 256;
    __m512i k2048 = _mm512_broadcast_i32x4(load_consts(k->fold2048));
    for (; len >= 256; p += 256, len -= 256) {
        x0 = fold512(x0, k2048, _mm512_loadu_si512(p));
        x1 = fold512(x1, k2048, _mm512_loadu_si512(p + 64));
        x2 = fold512(x2, k2048, _mm512_loadu_si512(p + 128));
        x3 = fold512(x3, k2048, _mm512_loadu_si512(p + 192));
    }
    __m512i k512 = _mm512_broadcast_i32x4(load_consts(k->fold512));
    x0 = fold512(x0, k512, x1);
    x0 = fold512(x0, k512, x2);
    x0 = fold512(x0, k512, x3);
    for (; len >= 64; p += 64, len -= 64)
        x0 = fold512(x0, k512, _mm512_loadu_si512(p));

    /* The four lanes, earliest first, folded into one. */
    __m128i k128 = load_consts(k->fold128);
    __m128i x = _mm512_extracti32x4_epi32(x0, 0);
    x = fold128(x, k128, _mm512_extracti32x4_epi32(x0, 1));
    x = fold128(x, k128, _mm512_extracti32x4_epi32(x0, 2));
    x = fold128(x, k128, _mm512_extracti32x4_epi32(x0, 3));
    return fold_finish(k, x, p, len);
}

static uint32_t crc32c_avx512(uint32_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    uint32_t c = ~crc;
    if (len >= FOLD512_MIN) {
        size_t n = len & ~(size_t)15;
        c = fold_avx512(&K32C, c, p, n);
        p += n;
        len -= n;
    }
    return ~crc32c_sse42_serial(c, p, len);
}

static uint32_t crc32_pclmul(uint32_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    uint32_t c = ~crc;
    if (len >= 64) {
        size_t n = len & ~(size_t)15;
        c = fold_sse(&K32, c, p, n);
        p += n;
        len -= n;
    }
    return ~slice8(slice_32, c, p, len);
}

static uint32_t crc32_avx512(uint32_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    uint32_t c = ~crc;
    if (len >= 64) {
        size_t n = len & ~(size_t)15;
        c = n >= FOLD512_MIN ? fold_avx512(&K32, c, p, n) : fold_sse(&K32, c, p, n);
        p += n;
        len -= n;
    }
    return ~slice8(slice_32, c, p, len);
}

#endif /* PYLOGQ_CRC_X86 */

/* ---------------------------------------------------------------------------
 * Dispatch.
 */

struct variant {
    const char *name;
    pylogq_crc_fn fn;
};

enum { MAX_VARIANTS = 4 };

/* Runnable implementations on this CPU, fastest first; [0] is the one in use. */
static struct variant variants_32c[MAX_VARIANTS], variants_32[MAX_VARIANTS];
static size_t n_32c, n_32;
static pylogq_crc_fn use_32c = crc32c_slice8, use_32 = crc32_slice8;

static void add(struct variant *v, size_t *n, const char *name, pylogq_crc_fn fn)
{
    v[*n].name = name;
    v[*n].fn = fn;
    (*n)++;
}

__attribute__((constructor)) static void pylogq_crc_init(void)
{
    x2n_init(x2n_32c, POLY_32C);
    x2n_init(x2n_32, POLY_32);
    slice_init(slice_32c, POLY_32C);
    slice_init(slice_32, POLY_32);
#ifdef PYLOGQ_CRC_X86
    shift_init(shift_long, LONG_BLOCK);
    shift_init(shift_short, SHORT_BLOCK);
    __builtin_cpu_init();
    int sse42 = __builtin_cpu_supports("sse4.2");
    int pclmul = sse42 && __builtin_cpu_supports("pclmul");
    int avx512 = pclmul && __builtin_cpu_supports("avx512f") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("vpclmulqdq");
    if (avx512) {
        add(variants_32c, &n_32c, "avx512-vpclmulqdq", crc32c_avx512);
        add(variants_32, &n_32, "avx512-vpclmulqdq", crc32_avx512);
    }
    if (sse42)
        add(variants_32c, &n_32c, "sse4.2-3way", crc32c_sse42);
    if (pclmul)
        add(variants_32, &n_32, "pclmulqdq", crc32_pclmul);
#endif
    add(variants_32c, &n_32c, "slicing-by-8", crc32c_slice8);
    add(variants_32, &n_32, "slicing-by-8", crc32_slice8);
    use_32c = variants_32c[0].fn;
    use_32 = variants_32[0].fn;
}

uint32_t pylogq_crc32c(uint32_t crc, const void *buf, size_t len)
{
    return use_32c(crc, buf, len);
}

uint32_t pylogq_crc32(uint32_t crc, const void *buf, size_t len)
{
    return use_32(crc, buf, len);
}

const char *pylogq_crc32c_impl(void) { return variants_32c[0].name; }
const char *pylogq_crc32_impl(void) { return variants_32[0].name; }

static const char *variant(const struct variant *v, size_t n, size_t i, pylogq_crc_fn *fn)
{
    if (i >= n)
        return NULL;
    if (fn)
        *fn = v[i].fn;
    return v[i].name;
}

const char *pylogq_crc32c_variant(size_t i, pylogq_crc_fn *fn)
{
    return variant(variants_32c, n_32c, i, fn);
}

const char *pylogq_crc32_variant(size_t i, pylogq_crc_fn *fn)
{
    return variant(variants_32, n_32, i, fn);
}
