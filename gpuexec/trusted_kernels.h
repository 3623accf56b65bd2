/* Trusted device kernels of the GPU backends (runner integrity checks).
 *
 * Compiled by the backend itself (cuda: NVRTC, at the first compare_device of a
 * context), never by or with submitted code. Plain CUDA C++ without includes, so it
 * compiles under NVRTC as is.
 *
 * ka_trusted_cmp_u<W>(a, b, n, diff): for n words of W bits at a and b (both aligned to
 * W/8 bytes), sets *diff to 1 if any word differs; *diff is left untouched where every
 * word is equal (the caller zeroes it first). Grid-stride loop: any grid and block size
 * covers all n words. ka_trusted_cmp_u128 compares 16-byte words (two 64-bit halves).
 *
 * ka_trusted_sum(a, n, key, sum): adds to *sum (the caller zeroes it first) a keyed
 * checksum of the n bytes at a (4-byte aligned): over the 4-byte words x_i (little
 * endian), sum of x_i * (mix(key ^ i) | 1) mod 2^64, and over the last n % 4 bytes b_t
 * (at byte t), b_t * (mix(key ^ t ^ 2^63) | 1); mix is splitmix64's finalizer (Steele,
 * Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014). Changing
 * any word changes the sum (the weights are odd), and without the key no change can be
 * made that keeps it, except by chance (2^-64). Same grid-stride shape as the compares;
 * each warp adds its part with one 64-bit atomicAdd. ka_trusted_sum_host computes the
 * same value on the host (tests). */
#ifndef KA_TRUSTED_KERNELS_H
#define KA_TRUSTED_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Kernel names, indexed by log2 of the word size in bytes (1, 2, 4, 8, 16 bytes). */
#define KA_TRUSTED_CMP_WIDTHS 5
static const char *const ka_trusted_cmp_names[KA_TRUSTED_CMP_WIDTHS]
    __attribute__((unused)) = {"ka_trusted_cmp_u8", "ka_trusted_cmp_u16", "ka_trusted_cmp_u32",
                               "ka_trusted_cmp_u64", "ka_trusted_cmp_u128"};
/* Every kernel of ka_trusted_kernels_src: the compares, then the checksum. */
#define KA_TRUSTED_NKERNELS (KA_TRUSTED_CMP_WIDTHS + 1)
#define KA_TRUSTED_SUM_NAME "ka_trusted_sum"
static const char *const ka_trusted_kernel_names[KA_TRUSTED_NKERNELS]
    __attribute__((unused)) = {"ka_trusted_cmp_u8",  "ka_trusted_cmp_u16",  "ka_trusted_cmp_u32",
                               "ka_trusted_cmp_u64", "ka_trusted_cmp_u128", KA_TRUSTED_SUM_NAME};

static inline uint64_t ka_trusted_mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
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
    s += (uint64_t)x * (ka_trusted_mix(key ^ (uint64_t)i) | 1);
  }
  for (size_t t = 4 * nw; t < n; t++)
    s += (uint64_t)p[t] * (ka_trusted_mix(key ^ (uint64_t)t ^ (1ULL << 63)) | 1);
  return s;
}

static const char ka_trusted_kernels_src[] __attribute__((unused)) =
    "struct alignas(16) ka_u128 { unsigned long long lo, hi; };\n"
    "__device__ __forceinline__ unsigned long long ka_x(unsigned char a, unsigned char b) {\n"
    "  return a ^ b; }\n"
    "__device__ __forceinline__ unsigned long long ka_x(unsigned short a, unsigned short b) {\n"
    "  return a ^ b; }\n"
    "__device__ __forceinline__ unsigned long long ka_x(unsigned a, unsigned b) {\n"
    "  return a ^ b; }\n"
    "__device__ __forceinline__ unsigned long long ka_x(unsigned long long a,\n"
    "                                                   unsigned long long b) { return a ^ b; }\n"
    "__device__ __forceinline__ unsigned long long ka_x(ka_u128 a, ka_u128 b) {\n"
    "  return (a.lo ^ b.lo) | (a.hi ^ b.hi); }\n"
    "template <typename T>\n"
    "__device__ void ka_cmp(const T *__restrict__ a, const T *__restrict__ b,\n"
    "                       unsigned long long n, unsigned *diff) {\n"
    "  unsigned long long acc = 0;\n"
    "  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;\n"
    "  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "       i < n; i += stride)\n"
    "    acc |= ka_x(a[i], b[i]);\n"
    "  if (acc) *diff = 1u;\n"
    "}\n"
    "#define KA_CMP(name, T) extern \"C\" __global__ void name(const T *a, const T *b, \\\n"
    "    unsigned long long n, unsigned *diff) { ka_cmp<T>(a, b, n, diff); }\n"
    "KA_CMP(ka_trusted_cmp_u8, unsigned char)\n"
    "KA_CMP(ka_trusted_cmp_u16, unsigned short)\n"
    "KA_CMP(ka_trusted_cmp_u32, unsigned)\n"
    "KA_CMP(ka_trusted_cmp_u64, unsigned long long)\n"
    "KA_CMP(ka_trusted_cmp_u128, ka_u128)\n"
    "__device__ __forceinline__ unsigned long long ka_mix(unsigned long long z) {\n"
    "  z += 0x9e3779b97f4a7c15ull;\n"
    "  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;\n"
    "  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;\n"
    "  return z ^ (z >> 31); }\n"
    "extern \"C\" __global__ void ka_trusted_sum(const unsigned char *a, unsigned long long n,\n"
    "                                            unsigned long long key,\n"
    "                                            unsigned long long *sum) {\n"
    "  const unsigned *w = (const unsigned *)a;\n"
    "  unsigned long long nw = n >> 2, acc = 0;\n"
    "  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;\n"
    "  unsigned long long i0 = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  for (unsigned long long i = i0; i < nw; i += stride)\n"
    "    acc += (unsigned long long)w[i] * (ka_mix(key ^ i) | 1ull);\n"
    "  if (i0 == 0)\n"
    "    for (unsigned long long t = nw << 2; t < n; t++)\n"
    "      acc += (unsigned long long)a[t] * (ka_mix(key ^ t ^ (1ull << 63)) | 1ull);\n"
    "  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);\n"
    "  if ((threadIdx.x & 31) == 0 && acc) atomicAdd(sum, acc);\n"
    "}\n";

#endif
