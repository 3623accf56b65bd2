/* Trusted device kernels of the GPU backends: the host-side view (names, the
 * generator's definition, host mirrors for tests). The kernels are in trusted_kernels.cu,
 * built ahead of time by nvcc (embedded fatbinary) or, without nvcc at build time, by the
 * backend with NVRTC at its first use; never by or with submitted code.
 *
 * ka_trusted_cmp_u<W>(a, b, n, diff): for n words of W bits at a and b (both aligned to
 * W/8 bytes), sets *diff to 1 if any word differs; *diff is left untouched where every
 * word is equal (the caller zeroes it first). Grid-stride loop: any grid and block size
 * covers all n words. ka_trusted_cmp_u128 compares 16-byte words (two 64-bit halves).
 *
 * ka_trusted_sum(a, n, key, sum): adds to *sum (the caller zeroes it first) a keyed
 * checksum of the n bytes at a (4-byte aligned): over the 4-byte words x_i (little
 * endian), sum of x_i * w(i, key) mod 2^64, and over the last n % 4 bytes b_t (at byte
 * t), b_t * w(t, ~key); the weight w(i, k) = h(lo(i) ^ lo(k) ^ h(hi(i) ^ hi(k))) | 1 with
 * h Chris Wellons' lowbias32 hash (2018) is odd, so changing any one word changes the
 * sum (|delta x w| < 2^64), and without the key a change of several words keeps it only
 * by chance (two words: 2^-31). 32-bit weights: one 32x32->64 multiply a word, so the
 * kernel runs near memory speed (issue 15). Same grid-stride shape as the compares;
 * each warp adds its part with one 64-bit atomicAdd. ka_trusted_sum_host computes the
 * same value on the host (tests).
 *
 * ka_trusted_fill(p, n, dtype, dist, a, b, key, check, diff): the input generator. Writes
 * (check 0) element i = ka_trusted_element_host(i, dtype, dist, a, b, key) for i < n, or
 * (check 1) sets *diff to 1 if any element at p differs from it. Counter-based (Philox),
 * so any call's inputs or poison are drawn anew on the device, or checked unchanged, at
 * memory speed, from a 64-bit key the submission never sees. dist KA_TRUSTED_FAST_NORMAL
 * draws a normal in single precision instead (not the host's bits).
 *
 * ka_trusted_absmax(p, n, dtype, out): raises *out (a non-negative double's bits, the
 * caller zeroes it) to the largest finite magnitude of the n elements.
 *
 * ka_trusted_close(want, got, n, dtype, abs_tol, rtol, poison, pkey, scale, out): out[0]
 * += the number of elements of got not within abs_tol s + rtol |want| of want, where s
 * is the double at scale (ka_trusted_absmax's result, left on the device) or 1 if that
 * is not above 0 (equal values match; NaN matches NaN unless got's element is still its
 * poison under pkey), out[1] lowered to the first such index (the caller sets out[0] =
 * 0, out[1] = ~0).
 *
 * Speed (issue 15): where the buffers are 16-byte aligned, fill, sum, absmax and close
 * move 16-byte chunks per thread (specialized by dtype and dist at compile time); the
 * rest and unaligned buffers go element by element. Both paths give the same results. */
#ifndef KA_TRUSTED_KERNELS_H
#define KA_TRUSTED_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Kernel names, indexed by log2 of the word size in bytes (1, 2, 4, 8, 16 bytes). */
#define KA_TRUSTED_CMP_WIDTHS 5
static const char *const ka_trusted_cmp_names[KA_TRUSTED_CMP_WIDTHS]
    __attribute__((unused)) = {"ka_trusted_cmp_u8", "ka_trusted_cmp_u16", "ka_trusted_cmp_u32",
                               "ka_trusted_cmp_u64", "ka_trusted_cmp_u128"};
/* Every kernel of trusted_kernels.cu: the compares, the checksum, the generator, the
 * largest magnitude and the comparison with tolerance. */
#define KA_TRUSTED_NKERNELS (KA_TRUSTED_CMP_WIDTHS + 4)
#define KA_TRUSTED_SUM_NAME "ka_trusted_sum"
#define KA_TRUSTED_FILL_NAME "ka_trusted_fill"
#define KA_TRUSTED_ABSMAX_NAME "ka_trusted_absmax"
#define KA_TRUSTED_CLOSE_NAME "ka_trusted_close"
static const char *const ka_trusted_kernel_names[KA_TRUSTED_NKERNELS]
    __attribute__((unused)) = {"ka_trusted_cmp_u8",  "ka_trusted_cmp_u16",   "ka_trusted_cmp_u32",
                               "ka_trusted_cmp_u64", "ka_trusted_cmp_u128",  KA_TRUSTED_SUM_NAME,
                               KA_TRUSTED_FILL_NAME, KA_TRUSTED_ABSMAX_NAME, KA_TRUSTED_CLOSE_NAME};

static inline uint64_t ka_trusted_mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static inline uint32_t ka_trusted_mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  return x ^ (x >> 16);
}

/* ka_trusted_sum's weight of word (or tail byte) i under key. */
static inline uint32_t ka_trusted_weight(uint64_t i, uint64_t key) {
  uint32_t hi = ka_trusted_mix32((uint32_t)(i >> 32) ^ (uint32_t)(key >> 32));
  return ka_trusted_mix32((uint32_t)i ^ (uint32_t)key ^ hi) | 1u;
}

/* The value ka_trusted_sum adds for the n bytes at a (any alignment here). */
static inline __attribute__((unused)) uint64_t ka_trusted_sum_host(const void *a, size_t n,
                                                                   uint64_t key) {
  const unsigned char *p = (const unsigned char *)a;
  uint64_t s = 0;
  size_t nw = n / 4;
  for (size_t i = 0; i < nw; i++) {
    uint32_t x;
    memcpy(&x, p + 4 * i, 4);
    s += (uint64_t)x * ka_trusted_weight(i, key);
  }
  for (size_t t = 4 * nw; t < n; t++) s += (uint64_t)p[t] * ka_trusted_weight(t, ~key);
  return s;
}

/* The kernels' source text (gpuexec/backends/trusted_kernels.cu, embedded at build time as
 * ka_trusted_kernels_src) and, where nvcc built it, their fatbinary
 * (ka_trusted_fatbin, KA_TRUSTED_FATBIN_SIZE bytes; 0 without nvcc, and the backend
 * compiles the text with NVRTC at its first use). */
#include "data.h"
#include "trusted_kernels_embed.h"

/* Element types (ka_dtype codes) as the kernels read them; KA_TRUSTED_POISON is the
 * fill "distribution" that writes poison instead of values. */
#define KA_TRUSTED_POISON 3
/* The fill "distribution" 4: a normal drawn in single precision with approximate
 * intrinsics (f32, f16, bf16 only), four elements per Philox counter; not the host's
 * bits (ka_trusted_element_host does not model it), for inputs that never leave the
 * device. */
#define KA_TRUSTED_FAST_NORMAL 4

/* The generator of ka_trusted_fill on the host: common/data.c's, bit for bit (data.h). */
static inline __attribute__((unused)) uint64_t ka_trusted_element_host(uint64_t i, int dt, int dist,
                                                                       double a, double b,
                                                                       uint64_t key) {
  return ka_gen_bits(i, (ka_dtype)dt, dist, a, b, key);
}

#endif
