/* Trusted device kernels of the GPU backends (runner integrity checks).
 *
 * Compiled by the backend itself (cuda: NVRTC, at the first compare_device of a
 * context), never by or with submitted code. Plain CUDA C++ without includes, so it
 * compiles under NVRTC as is.
 *
 * ka_trusted_cmp_u<W>(a, b, n, diff): for n words of W bits at a and b (both aligned to
 * W/8 bytes), sets *diff to 1 if any word differs; *diff is left untouched where every
 * word is equal (the caller zeroes it first). Grid-stride loop: any grid and block size
 * covers all n words. ka_trusted_cmp_u128 compares 16-byte words (two 64-bit halves). */
#ifndef KA_TRUSTED_KERNELS_H
#define KA_TRUSTED_KERNELS_H

/* Kernel names, indexed by log2 of the word size in bytes (1, 2, 4, 8, 16 bytes). */
#define KA_TRUSTED_CMP_WIDTHS 5
static const char *const ka_trusted_cmp_names[KA_TRUSTED_CMP_WIDTHS]
    __attribute__((unused)) = {"ka_trusted_cmp_u8", "ka_trusted_cmp_u16", "ka_trusted_cmp_u32",
                               "ka_trusted_cmp_u64", "ka_trusted_cmp_u128"};

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
    "KA_CMP(ka_trusted_cmp_u128, ka_u128)\n";

#endif
