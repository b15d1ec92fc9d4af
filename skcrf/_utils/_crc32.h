/* CRC-32 (zlib's and the zip format's: reflected polynomial 0xEDB88320,
   inverted before and after) by carry-less multiplication, for checking a
   model file's members as it is opened (skcrf/_persist/_aligned.py).

   The CRC of a message is, up to the inversions, M(x) * x^32 mod P(x), where
   the first byte's lowest bit is M's highest coefficient. A 16-byte block
   loaded into an SSE register holds, at bit j, the coefficient of x^(127-j)
   of its own polynomial. Folding a block A forward over D bits replaces it by
   A' = A * x^D mod P, a polynomial of at most 96 bits, XORed into the block D
   bits later: the message's remainder, and so its CRC, is unchanged. With the
   low and high 64-bit halves a_L, a_H of A (A = a_L * x^64 + a_H),
       A * x^D = a_L * x^(64+D) + a_H * x^D,
   and PCLMULQDQ of two 64-bit halves read as polynomials in this bit order
   gives their product times x^-1 in the 128-bit order, so the constants are
   x^(63+D) mod P (low half) and x^(D-1) mod P (high half), each at bit
   63 - degree. Four blocks fold over D = 512 bits at a time (the four
   multiplications overlap), then into one over D = 128; the last block and
   the bytes that remain go through the byte table.

   The constants were computed by polynomial arithmetic over GF(2) (and the
   whole is tested against zlib.crc32: tests/test_array_checks.py). Only the
   function marked with the target attribute uses PCLMULQDQ; it is called
   when the CPU has it (skcrf_crc32_init); otherwise the caller uses zlib. */
#ifndef SKCRF_CRC32_H
#define SKCRF_CRC32_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define SKCRF_CRC32_CLMUL 1
#include <immintrin.h>
#endif

static uint32_t skcrf_crc32_table[256];
static int skcrf_crc32_fast = 0;

/* Fill the byte table; returns 1 if skcrf_crc32 may be called. */
static int skcrf_crc32_init(void) {
    uint32_t c;
    int k;
    for (uint32_t i = 0; i < 256; i++) {
        c = i;
        for (k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
        skcrf_crc32_table[i] = c;
    }
#ifdef SKCRF_CRC32_CLMUL
    __builtin_cpu_init();
    skcrf_crc32_fast = __builtin_cpu_supports("pclmul") != 0;
#endif
    return skcrf_crc32_fast;
}

/* The CRC register (not inverted) after the bytes p[0:n]. */
static inline uint32_t skcrf_crc32_bytes(uint32_t reg, const uint8_t *p, size_t n) {
    while (n--)
        reg = skcrf_crc32_table[(reg ^ *p++) & 0xFF] ^ (reg >> 8);
    return reg;
}

#ifdef SKCRF_CRC32_CLMUL
__attribute__((target("pclmul"))) static inline __m128i
skcrf_crc32_fold(__m128i block, __m128i constants, __m128i next) {
    __m128i low = _mm_clmulepi64_si128(block, constants, 0x00);
    __m128i high = _mm_clmulepi64_si128(block, constants, 0x11);
    return _mm_xor_si128(_mm_xor_si128(low, high), next);
}

#define SKCRF_LOAD(p) _mm_loadu_si128((const __m128i *)(p))

/* zlib.crc32(p[0:n], value); only when skcrf_crc32_init returned 1. */
__attribute__((target("pclmul"))) static uint32_t
skcrf_crc32(uint32_t value, const uint8_t *p, size_t n) {
    uint32_t reg = ~value;
    uint8_t last[16];
    if (n >= 64) {
        /* (x^575, x^511) and (x^191, x^127) mod P */
        const __m128i over_512 = _mm_set_epi64x((long long)0xCAD38E8F00000000ull,
                                                (long long)0x653D982200000000ull);
        const __m128i over_128 = _mm_set_epi64x((long long)0x9BA54C6F00000000ull,
                                                (long long)0x65673B4600000000ull);
        /* the register's start value enters as the first four bytes' XOR */
        __m128i x0 = _mm_xor_si128(SKCRF_LOAD(p), _mm_cvtsi32_si128((int)reg));
        __m128i x1 = SKCRF_LOAD(p + 16), x2 = SKCRF_LOAD(p + 32), x3 = SKCRF_LOAD(p + 48);
        for (p += 64, n -= 64; n >= 64; p += 64, n -= 64) {
            x0 = skcrf_crc32_fold(x0, over_512, SKCRF_LOAD(p));
            x1 = skcrf_crc32_fold(x1, over_512, SKCRF_LOAD(p + 16));
            x2 = skcrf_crc32_fold(x2, over_512, SKCRF_LOAD(p + 32));
            x3 = skcrf_crc32_fold(x3, over_512, SKCRF_LOAD(p + 48));
        }
        x1 = skcrf_crc32_fold(x0, over_128, x1);
        x2 = skcrf_crc32_fold(x1, over_128, x2);
        x3 = skcrf_crc32_fold(x2, over_128, x3);
        for (; n >= 16; p += 16, n -= 16)
            x3 = skcrf_crc32_fold(x3, over_128, SKCRF_LOAD(p));
        _mm_storeu_si128((__m128i *)last, x3);
        reg = skcrf_crc32_bytes(0, last, 16);
    }
    return ~skcrf_crc32_bytes(reg, p, n);
}

#undef SKCRF_LOAD
#else
static uint32_t skcrf_crc32(uint32_t value, const uint8_t *p, size_t n) {
    return ~skcrf_crc32_bytes(~value, p, n); /* (slower than zlib's: the caller uses zlib) */
}
#endif

#endif
