/* Trusted device kernels of the GPU backends: the runner's staging, input checks and
 * comparisons (docs/integrity.md). Never compiled by or with submitted code.
 *
 * Built ahead of time by nvcc into a fatbinary that the cuda backend embeds
 * (gpuexec/CMakeLists.txt), and kept compilable by NVRTC as is (no includes, plain
 * CUDA C++17) for a build without nvcc and for the compile-only test. The host-side
 * view (kernel names, the generator's definition, host mirrors used by the tests) is
 * gpuexec/trusted_kernels.h; the two must agree.
 *
 * Element types are the ka_dtype codes of common/task.h: 0 f32, 1 f64, 2 f16, 3 bf16,
 * 4 i8, 5 u8, 6 i32, 7 i64. Every kernel is a grid-stride loop: any grid and block size
 * covers every element. */

typedef unsigned long long ka_u64;
typedef unsigned int ka_u32;

/* ---- bytewise compares and the keyed checksum ---------------------------------- */

struct alignas(16) ka_u128 {
  ka_u64 lo, hi;
};
__device__ __forceinline__ ka_u64 ka_x(unsigned char a, unsigned char b) {
  return a ^ b;
}
__device__ __forceinline__ ka_u64 ka_x(unsigned short a, unsigned short b) {
  return a ^ b;
}
__device__ __forceinline__ ka_u64 ka_x(ka_u32 a, ka_u32 b) {
  return a ^ b;
}
__device__ __forceinline__ ka_u64 ka_x(ka_u64 a, ka_u64 b) {
  return a ^ b;
}
__device__ __forceinline__ ka_u64 ka_x(ka_u128 a, ka_u128 b) {
  return (a.lo ^ b.lo) | (a.hi ^ b.hi);
}

/* Sets *diff to 1 if any of the n words at a and b differ; untouched otherwise. */
template <typename T>
__device__ void ka_cmp(const T *__restrict__ a, const T *__restrict__ b, ka_u64 n, unsigned *diff) {
  ka_u64 acc = 0;
  ka_u64 stride = (ka_u64)gridDim.x * blockDim.x;
  for (ka_u64 i = (ka_u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    acc |= ka_x(a[i], b[i]);
  if (acc) *diff = 1u;
}
#define KA_CMP(name, T)                                                               \
  extern "C" __global__ void name(const T *a, const T *b, ka_u64 n, unsigned *diff) { \
    ka_cmp<T>(a, b, n, diff);                                                         \
  }
KA_CMP(ka_trusted_cmp_u8, unsigned char)
KA_CMP(ka_trusted_cmp_u16, unsigned short)
KA_CMP(ka_trusted_cmp_u32, ka_u32)
KA_CMP(ka_trusted_cmp_u64, ka_u64)
KA_CMP(ka_trusted_cmp_u128, ka_u128)

/* A grid-stride loop over lo <= i < n taking four indices a thread apart in each turn
 * (i, i + stride, ...), unrolled, so that a thread has four independent loads or element
 * computations in flight: one 4-byte access at a time per thread leaves too few bytes in
 * flight to reach the H200's memory bandwidth (Little's law; measured with
 * bench/trusted_ops.c: ~1.3 TB/s). The body (the macro's rest) uses i. The scalar path:
 * unaligned buffers and the tails of the chunked loops (KA_FOR_CHUNKS). */
#define KA_FOR4(lo, n, ...)                                                                 \
  do {                                                                                      \
    ka_u64 ka_stride_ = (ka_u64)gridDim.x * blockDim.x;                                     \
    for (ka_u64 ka_b_ = (lo) + (ka_u64)blockIdx.x * blockDim.x + threadIdx.x; ka_b_ < (n);  \
         ka_b_ += 4 * ka_stride_) {                                                         \
      _Pragma("unroll") for (int ka_k_ = 0; ka_k_ < 4; ka_k_++) {                           \
        ka_u64 i = ka_b_ + (ka_u64)ka_k_ * ka_stride_;                                      \
        if (i < (n)) {                                                                      \
          __VA_ARGS__                                                                       \
        }                                                                                   \
      }                                                                                     \
    }                                                                                       \
  } while (0)

/* A grid-stride loop over the 16-byte chunks k < nc of 16-byte aligned buffers, two
 * chunks a thread apart in each turn: one 128-bit load or store per element group
 * (CUDA C++ Best Practices Guide, "Coalesced Access to Global Memory") and two of them
 * in flight per thread. The body (the macro's rest) uses k. */
#define KA_FOR_CHUNKS(nc, ...)                                                  \
  do {                                                                          \
    ka_u64 ka_cs_ = (ka_u64)gridDim.x * blockDim.x;                             \
    for (ka_u64 ka_cb_ = (ka_u64)blockIdx.x * blockDim.x + threadIdx.x; ka_cb_ < (nc); \
         ka_cb_ += 2 * ka_cs_) {                                                \
      _Pragma("unroll") for (int ka_ck_ = 0; ka_ck_ < 2; ka_ck_++) {            \
        ka_u64 k = ka_cb_ + (ka_u64)ka_ck_ * ka_cs_;                            \
        if (k < (nc)) {                                                         \
          __VA_ARGS__                                                           \
        }                                                                       \
      }                                                                         \
    }                                                                           \
  } while (0)

/* Whether the buffers at p and q start at 16-byte boundaries (the chunked path). */
__device__ __forceinline__ bool ka_aligned16(const void *p, const void *q) {
  return (((ka_u64)p | (ka_u64)q) & 15) == 0;
}

/* The size in bytes of an element of dtype DT (a compile-time constant). */
template <int DT>
struct ka_dt {
  static constexpr int es = DT == 1 || DT == 7 ? 8 : DT == 2 || DT == 3 ? 2 : DT == 4 || DT == 5 ? 1 : 4;
  static constexpr int per_chunk = 16 / es;
};

/* Element j (a compile-time index below 16 / ES) of chunk c, as bits (little endian). */
template <int ES>
__device__ __forceinline__ ka_u64 ka_part(const ka_u128 &c, int j) {
  constexpr int per = 8 / ES;
  ka_u64 w = j < per ? c.lo : c.hi;
  if constexpr (ES == 8)
    return w;
  else
    return (w >> ((j % per) * ES * 8)) & ((1ull << (ES * 8)) - 1);
}

/* Sets element j of chunk c (zero there before) to the low ES bytes of v. */
template <int ES>
__device__ __forceinline__ void ka_set_part(ka_u128 &c, int j, ka_u64 v) {
  constexpr int per = 8 / ES;
  if constexpr (ES == 8) {
    if (j)
      c.hi = v;
    else
      c.lo = v;
  } else {
    ka_u64 s = (v & ((1ull << (ES * 8)) - 1)) << ((j % per) * ES * 8);
    if (j < per)
      c.lo |= s;
    else
      c.hi |= s;
  }
}

/* Chris Wellons' lowbias32 integer hash (2018, "Prospecting for Hash Functions"). */
__device__ __forceinline__ ka_u32 ka_mix32(ka_u32 x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  return x ^ (x >> 16);
}

/* The odd 32-bit weight of word (or tail byte) i under key (trusted_kernels.h); hi is
 * ka_mix32(hi(i) ^ hi(key)), the same for every word of a chunk. */
__device__ __forceinline__ ka_u32 ka_weight_h(ka_u64 i, ka_u64 key, ka_u32 hi) {
  return ka_mix32((ka_u32)i ^ (ka_u32)key ^ hi) | 1u;
}
__device__ __forceinline__ ka_u32 ka_weight(ka_u64 i, ka_u64 key) {
  return ka_weight_h(i, key, ka_mix32((ka_u32)(i >> 32) ^ (ka_u32)(key >> 32)));
}

/* Adds to *sum a keyed checksum of the n bytes at a (trusted_kernels.h): 16-byte chunks
 * where a is aligned to 16, the other words one by one, the tail bytes by thread 0. */
extern "C" __global__ void ka_trusted_sum(const unsigned char *a, ka_u64 n, ka_u64 key,
                                          ka_u64 *sum) {
  const ka_u32 *__restrict__ w = (const ka_u32 *)a;
  ka_u64 nw = n >> 2, acc = 0, done = 0;
  ka_u64 i0 = (ka_u64)blockIdx.x * blockDim.x + threadIdx.x;
  if (ka_aligned16(a, a)) {
    const ka_u128 *__restrict__ q = (const ka_u128 *)a;
    done = nw & ~3ull;
    KA_FOR_CHUNKS(done >> 2, {
      ka_u128 c = q[k];
      ka_u64 i = 4 * k; /* a chunk's four words share hi(i) */
      ka_u32 hi = ka_mix32((ka_u32)(i >> 32) ^ (ka_u32)(key >> 32));
      acc += (c.lo & 0xffffffffull) * ka_weight_h(i, key, hi);
      acc += (c.lo >> 32) * ka_weight_h(i + 1, key, hi);
      acc += (c.hi & 0xffffffffull) * ka_weight_h(i + 2, key, hi);
      acc += (c.hi >> 32) * ka_weight_h(i + 3, key, hi);
    });
  }
  KA_FOR4(done, nw, acc += (ka_u64)w[i] * ka_weight(i, key););
  if (i0 == 0)
    for (ka_u64 t = nw << 2; t < n; t++) acc += (ka_u64)a[t] * ka_weight(t, ~key);
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0 && acc) atomicAdd(sum, acc);
}

/* ---- the input generator ------------------------------------------------------- */

/* Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel Random Numbers: As Easy as 1, 2,
 * 3", SC 2011; constants and round function as in Random123's philox.h). */
__device__ __forceinline__ void ka_philox(ka_u32 c0, ka_u32 c1, ka_u32 c2, ka_u32 c3, ka_u32 k0,
                                          ka_u32 k1, ka_u32 *o) {
#pragma unroll
  for (int r = 0; r < 10; r++) {
    if (r) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    ka_u32 lo0 = 0xD2511F53u * c0, hi0 = __umulhi(0xD2511F53u, c0);
    ka_u32 lo1 = 0xCD9E8D57u * c2, hi1 = __umulhi(0xCD9E8D57u, c2);
    ka_u32 n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  o[0] = c0, o[1] = c1, o[2] = c2, o[3] = c3;
}

/* The four words of element i under key (counter (i, 'ka'), trusted_kernels.h). */
__device__ __forceinline__ void ka_gen(ka_u64 i, ka_u64 key, ka_u32 *x) {
  ka_philox((ka_u32)i, (ka_u32)(i >> 32), 0x6b61u, 0u, (ka_u32)key, (ka_u32)(key >> 32), x);
}

__device__ __forceinline__ unsigned short ka_f2h(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ float ka_h2f(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
/* bf16 from f32, round to nearest even, NaN kept quiet (common/data.c ka_f32_to_bf16) */
__device__ __forceinline__ unsigned short ka_f2bf(float f) {
  ka_u32 u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}

__device__ __forceinline__ int ka_es(int dt) {
  return dt == 1 || dt == 7 ? 8 : dt == 2 || dt == 3 ? 2 : dt == 4 || dt == 5 ? 1 : 4;
}

/* The generator's arithmetic, every operation rounded once (never fused), in the order
 * of common/data.c, so that the device draws the host's bits (data.h). */
#define KA_M(x, y) __dmul_rn((x), (y))
#define KA_A(x, y) __dadd_rn((x), (y))

/* ka_gen_log of common/data.c: ln x for 0 < x <= 1. */
__device__ __forceinline__ double ka_log(double x) {
  ka_u64 u = (ka_u64)__double_as_longlong(x);
  int e = (int)((u >> 52) & 0x7ff) - 1023;
  double m = __longlong_as_double((long long)((u & 0x000fffffffffffffull) | 0x3ff0000000000000ull));
  if (m > 1.4142135623730951) m = KA_M(m, 0.5), e = e + 1;
  double s = __ddiv_rn(KA_A(m, -1.0), KA_A(m, 1.0)), z = KA_M(s, s);
  double p = 0.06666666666666667;
  p = KA_A(KA_M(p, z), 0.07692307692307693);
  p = KA_A(KA_M(p, z), 0.09090909090909091);
  p = KA_A(KA_M(p, z), 0.1111111111111111);
  p = KA_A(KA_M(p, z), 0.14285714285714285);
  p = KA_A(KA_M(p, z), 0.2);
  p = KA_A(KA_M(p, z), 0.3333333333333333);
  p = KA_A(KA_M(p, z), 1.0);
  return KA_A(KA_M((double)e, 0.6931471805599453), KA_M(KA_M(2.0, s), p));
}

/* ka_gen_cos2pi of common/data.c: cos(2 pi u) for 0 <= u < 1. */
__device__ __forceinline__ double ka_cos2pi(double u) {
  int q = (int)KA_A(KA_M(u, 4.0), 0.5);
  double r = KA_A(u, -KA_M((double)q, 0.25)), a = KA_M(r, 6.283185307179586), z = KA_M(a, a), p;
  if (q & 1) {
    p = 1.6059043836821613e-10;
    p = KA_A(KA_M(p, z), -2.505210838544172e-08);
    p = KA_A(KA_M(p, z), 2.7557319223985893e-06);
    p = KA_A(KA_M(p, z), -0.0001984126984126984);
    p = KA_A(KA_M(p, z), 0.008333333333333333);
    p = KA_A(KA_M(p, z), -0.16666666666666666);
    p = KA_A(KA_M(p, z), 1.0);
    p = KA_M(a, p);
    return (q & 3) == 1 ? -p : p;
  }
  p = -1.1470745597729725e-11;
  p = KA_A(KA_M(p, z), 2.08767569878681e-09);
  p = KA_A(KA_M(p, z), -2.755731922398589e-07);
  p = KA_A(KA_M(p, z), 2.48015873015873e-05);
  p = KA_A(KA_M(p, z), -0.001388888888888889);
  p = KA_A(KA_M(p, z), 0.041666666666666664);
  p = KA_A(KA_M(p, z), -0.5);
  p = KA_A(KA_M(p, z), 1.0);
  return (q & 3) == 2 ? -p : p;
}

/* A value drawn from dist (0 normal: a mean, b std; 1 uniform [a, b); 2 integers
 * ceil(a)..floor(b)) out of the words x, as ka_gen_bits of common/data.c. */
__device__ __forceinline__ double ka_value(int dist, double a, double b, const ka_u32 *x, int odd) {
  double u1 = KA_M((double)(((((ka_u64)x[0]) << 32) | x[1]) >> 11), 1.1102230246251565e-16);
  double u2 = KA_M((double)(((((ka_u64)x[2]) << 32) | x[3]) >> 11), 1.1102230246251565e-16);
  if (dist == 0) {
    double s = __dsqrt_rn(KA_M(-2.0, ka_log(KA_A(1.0, -u1))));
    return KA_A(a, KA_M(b, KA_M(s, ka_cos2pi(odd ? fabs(KA_A(u2, -0.25)) : u2))));
  }
  if (dist == 1) return KA_A(a, KA_M(KA_A(b, -a), u1));
  return KA_A(ceil(a), floor(KA_M(u1, KA_A(KA_A(floor(b), -ceil(a)), 1.0))));
}

/* The bits of v stored as dtype dt (as common/data.c stores a double). */
__device__ __forceinline__ ka_u64 ka_bits_of(int dt, double v) {
  switch (dt) {
    case 0:
      return __float_as_uint((float)v);
    case 1:
      return (ka_u64)__double_as_longlong(v);
    case 2:
      return ka_f2h((float)v);
    case 3:
      return ka_f2bf((float)v);
    case 4:
      return (unsigned char)(signed char)(long long)v;
    case 5:
      return (unsigned char)(long long)v;
    case 6:
      return (ka_u32)(int)(long long)v;
    default:
      return (ka_u64)(long long)v;
  }
}

/* The bits of poison element i under key (data.h KA_GEN_POISON): lowbias32 of (i, key)
 * as ka_weight mixes them (without the low bit set), and for 8-byte types a second
 * lowbias32 of that above it. Poison needs no secrecy beyond its call (the candidate
 * reads it in its outputs), only a pattern per call and element, so no Philox: two
 * 32-bit hashes an element keep the fill at memory speed (issue 15). */
__device__ __forceinline__ ka_u64 ka_poison_r(ka_u64 i, ka_u64 key, bool wide) {
  ka_u32 hi = ka_mix32((ka_u32)(i >> 32) ^ (ka_u32)(key >> 32));
  ka_u32 lo = ka_mix32((ka_u32)i ^ (ka_u32)key ^ hi);
  return wide ? ((ka_u64)ka_mix32(lo + 0x9e3779b9u) << 32) | lo : (ka_u64)lo;
}

/* Poison of dtype dt out of the random bits r: a quiet NaN with a random payload for
 * floats, random bits for integers (common/data.c ka_fill_poison's patterns). */
__device__ __forceinline__ ka_u64 ka_poison_of(int dt, ka_u64 r) {
  switch (dt) {
    case 0:
      return 0x7fc00000u | (ka_u32)(r & 0x3fffffu) | 1u;
    case 1:
      return 0x7ff8000000000000ull | (r & 0x7ffffffffffffull) | 1u;
    case 2:
      return (unsigned short)(0x7e00u | (r & 0x1ffu) | 1u);
    case 3:
      return (unsigned short)(0x7fc0u | (r & 0x3fu) | 1u);
    case 4:
    case 5:
      return r & 0xffu;
    case 6:
      return r & 0xffffffffu;
    default:
      return r;
  }
}

/* Poison element i of dtype dt under key. */
__device__ __forceinline__ ka_u64 ka_poison(ka_u64 i, int dt, ka_u64 key) {
  return ka_poison_of(dt, ka_poison_r(i, key, ka_es(dt) == 8));
}

__device__ __forceinline__ ka_u64 ka_load_bits(const unsigned char *p, ka_u64 i, int es) {
  switch (es) {
    case 1:
      return p[i];
    case 2:
      return ((const unsigned short *)p)[i];
    case 4:
      return ((const ka_u32 *)p)[i];
    default:
      return ((const ka_u64 *)p)[i];
  }
}
__device__ __forceinline__ void ka_store_bits(unsigned char *p, ka_u64 i, int es, ka_u64 v) {
  switch (es) {
    case 1:
      p[i] = (unsigned char)v;
      break;
    case 2:
      ((unsigned short *)p)[i] = (unsigned short)v;
      break;
    case 4:
      ((ka_u32 *)p)[i] = (ka_u32)v;
      break;
    default:
      ((ka_u64 *)p)[i] = v;
      break;
  }
}

/* Element i of the generated tensor (dist 3: poison) as dtype bits. */
__device__ __forceinline__ ka_u64 ka_element(ka_u64 i, int dt, int dist, double a, double b,
                                             ka_u64 key) {
  if (dist == 3) return ka_poison(i, dt, key);
  ka_u32 x[4];
  ka_gen(dist == 0 ? i >> 1 : i, key, x); /* normal: a Box-Muller pair per counter */
  return ka_bits_of(dt, ka_value(dist, a, b, x, (int)(i & 1)));
}

/* Elements 2j and 2j + 1 of a normal tensor (one counter, one logarithm, data.h). */
__device__ __forceinline__ void ka_normal_pair(ka_u64 j, int dt, double a, double b, ka_u64 key,
                                               ka_u64 *v0, ka_u64 *v1) {
  ka_u32 x[4];
  ka_gen(j, key, x);
  double u1 = KA_M((double)(((((ka_u64)x[0]) << 32) | x[1]) >> 11), 1.1102230246251565e-16);
  double u2 = KA_M((double)(((((ka_u64)x[2]) << 32) | x[3]) >> 11), 1.1102230246251565e-16);
  double s = __dsqrt_rn(KA_M(-2.0, ka_log(KA_A(1.0, -u1))));
  *v0 = ka_bits_of(dt, KA_A(a, KA_M(b, KA_M(s, ka_cos2pi(u2)))));
  *v1 = ka_bits_of(dt, KA_A(a, KA_M(b, KA_M(s, ka_cos2pi(fabs(KA_A(u2, -0.25)))))));
}

/* sqrt x for x >= 0 by the hardware's approximation (PTX ISA, sqrt.approx.f32: maximum
 * relative error 2^-23 on sm_90 class devices), for the fast normal only. */
__device__ __forceinline__ float ka_sqrt_approx(float x) {
  float r;
  asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

/* Elements 4j .. 4j + 3 of a fast normal tensor (dist 4, f32/f16/bf16 only): one counter,
 * two Box-Muller pairs (Box and Muller, Ann. Math. Statist. 29(2), 1958) in single
 * precision with the hardware's approximate logarithm, square root and sine/cosine (CUDA
 * C++ Programming Guide, "Intrinsic Functions": __logf, __sincosf). Not the host's bits:
 * for the inputs of timed calls only, which never leave the device (their outputs are
 * verified against the baseline's on the same inputs). u1 in (0, 1], so the logarithm
 * is finite; its negation is clamped at 0. Each operation rounded once (no contraction,
 * whatever the compiler's flags), so that a draw and its check agree bit for bit. */
__device__ __forceinline__ void ka_fast_normal4(ka_u64 j, int dt, float a, float b, ka_u64 key,
                                                ka_u64 *v) {
  ka_u32 x[4];
  ka_gen(j, key, x);
#pragma unroll
  for (int h = 0; h < 2; h++) {
    float u1 = ((float)(x[2 * h] >> 8) + 1.0f) * 5.9604644775390625e-8f; /* 2^-24 */
    float u2 = (float)(x[2 * h + 1] >> 8) * 5.9604644775390625e-8f;
    /* __logf's absolute error (about 2^-22) exceeds |ln u1| just below 1: clamped, so
     * that the square root never sees a negative (review) */
    float r = __fmul_rn(b, ka_sqrt_approx(fmaxf(0.0f, __fmul_rn(-2.0f, __logf(u1))))), sn, cs;
    __sincosf(__fmul_rn(6.2831853071795865f, u2), &sn, &cs);
    float f0 = __fadd_rn(a, __fmul_rn(r, cs)), f1 = __fadd_rn(a, __fmul_rn(r, sn));
    v[2 * h] = dt == 0 ? __float_as_uint(f0) : dt == 2 ? ka_f2h(f0) : ka_f2bf(f0);
    v[2 * h + 1] = dt == 0 ? __float_as_uint(f1) : dt == 2 ? ka_f2h(f1) : ka_f2bf(f1);
  }
}

/* Chunk k of a 16-byte aligned tensor of fill (DT, DIST): its elements k V .. k V + V - 1
 * (V = 16 / element size), drawn by the generator's own groups (a fast normal's fours,
 * one element otherwise). */
template <int DT, int DIST>
__device__ __forceinline__ ka_u128 ka_gen_chunk(ka_u64 k, double a, double b, ka_u64 key) {
  constexpr int ES = ka_dt<DT>::es, V = ka_dt<DT>::per_chunk;
  ka_u128 c = {0, 0};
  if constexpr (DIST == 4) {
#pragma unroll
    for (int g = 0; g < V / 4; g++) {
      ka_u64 v[4];
      ka_fast_normal4(k * (V / 4) + g, DT, (float)a, (float)b, key, v);
#pragma unroll
      for (int j = 0; j < 4; j++) ka_set_part<ES>(c, 4 * g + j, v[j]);
    }
  } else {
#pragma unroll
    for (int j = 0; j < V; j++) ka_set_part<ES>(c, j, ka_element(k * V + j, DT, DIST, a, b, key));
  }
  return c;
}

/* The chunked part of ka_trusted_fill for (DT, DIST) over the whole chunks of the n
 * elements at p (16-byte aligned): writes them, or with check sets *bad where one
 * differs. Returns the number of elements covered (the rest is the scalar loop's). */
template <int DT, int DIST>
__device__ ka_u64 ka_fill_chunks(unsigned char *p, ka_u64 n, double a, double b, ka_u64 key,
                                 int check, unsigned *bad) {
  constexpr int V = ka_dt<DT>::per_chunk;
  ka_u128 *q = (ka_u128 *)p;
  ka_u64 nc = n / V;
  if (check) {
    ka_u64 acc = 0;
    KA_FOR_CHUNKS(nc, {
      ka_u128 w = q[k], g = ka_gen_chunk<DT, DIST>(k, a, b, key);
      acc |= (w.lo ^ g.lo) | (w.hi ^ g.hi);
    });
    if (acc) *bad = 1u;
  } else {
    KA_FOR_CHUNKS(nc, q[k] = ka_gen_chunk<DT, DIST>(k, a, b, key););
  }
  return nc * V;
}

/* ka_fill_chunks for dtype DT, by dist: poison and the fast normal (f32, f16 and bf16),
 * the fills of every timed call. The exact distributions (correctness inputs, integer
 * and uniform timed inputs) are bound by the generator's arithmetic, not by memory, and
 * stay element by element (0 elements covered here): their chunked forms multiplied the
 * kernels' build time by 15. */
template <int DT>
__device__ ka_u64 ka_fill_chunks_dt(unsigned char *p, ka_u64 n, int dist, double a, double b,
                                    ka_u64 key, int check, unsigned *bad) {
  if (dist == 3) return ka_fill_chunks<DT, 3>(p, n, a, b, key, check, bad);
  if constexpr (DT == 0 || DT == 2 || DT == 3)
    if (dist == 4) return ka_fill_chunks<DT, 4>(p, n, a, b, key, check, bad);
  return 0;
}

/* The scalar part of ka_trusted_fill: elements lo .. n - 1 (lo a multiple of 4). */
__device__ void ka_fill_scalar(unsigned char *p, ka_u64 lo, ka_u64 n, int dt, int dist, double a,
                               double b, ka_u64 key, int check, unsigned *bad_out) {
  int es = ka_es(dt);
  unsigned bad = 0;
  if (dist == 4) { /* fast normal, by fours (ka_fast_normal4) */
    KA_FOR4(lo >> 2, (n + 3) >> 2, {
      ka_u64 v[4];
      ka_fast_normal4(i, dt, (float)a, (float)b, key, v);
#pragma unroll
      for (int k = 0; k < 4; k++) {
        ka_u64 e = 4 * i + k;
        if (e < n) {
          if (check)
            bad |= ka_load_bits(p, e, es) != v[k];
          else
            ka_store_bits(p, e, es, v[k]);
        }
      }
    });
  } else if (dist == 0) { /* by pairs: one counter and logarithm for two elements */
    KA_FOR4(lo >> 1, (n + 1) >> 1, {
      ka_u64 v0, v1, e = 2 * i;
      ka_normal_pair(i, dt, a, b, key, &v0, &v1);
      if (check) {
        bad |= ka_load_bits(p, e, es) != v0;
        if (e + 1 < n) bad |= ka_load_bits(p, e + 1, es) != v1;
      } else {
        ka_store_bits(p, e, es, v0);
        if (e + 1 < n) ka_store_bits(p, e + 1, es, v1);
      }
    });
  } else if (check) {
    KA_FOR4(lo, n, bad |= ka_load_bits(p, i, es) != ka_element(i, dt, dist, a, b, key););
  } else {
    KA_FOR4(lo, n, ka_store_bits(p, i, es, ka_element(i, dt, dist, a, b, key)););
  }
  if (bad) *bad_out = 1u;
}

/* check 0: writes the n generated elements at p. check 1: sets *diff to 1 if any
 * element at p differs from what would be written (untouched otherwise). A 16-byte
 * aligned p is covered by chunks specialized by dtype and dist, the rest element by
 * element. */
extern "C" __global__ void ka_trusted_fill(unsigned char *p, ka_u64 n, int dt, int dist, double a,
                                           double b, ka_u64 key, int check, unsigned *diff) {
  ka_u64 done = 0;
  if (ka_aligned16(p, p)) {
    switch (dt) {
      case 0:
        done = ka_fill_chunks_dt<0>(p, n, dist, a, b, key, check, diff);
        break;
      case 1:
        done = ka_fill_chunks_dt<1>(p, n, dist, a, b, key, check, diff);
        break;
      case 2:
        done = ka_fill_chunks_dt<2>(p, n, dist, a, b, key, check, diff);
        break;
      case 3:
        done = ka_fill_chunks_dt<3>(p, n, dist, a, b, key, check, diff);
        break;
      case 4:
        done = ka_fill_chunks_dt<4>(p, n, dist, a, b, key, check, diff);
        break;
      case 5:
        done = ka_fill_chunks_dt<5>(p, n, dist, a, b, key, check, diff);
        break;
      case 6:
        done = ka_fill_chunks_dt<6>(p, n, dist, a, b, key, check, diff);
        break;
      default:
        done = ka_fill_chunks_dt<7>(p, n, dist, a, b, key, check, diff);
        break;
    }
  }
  ka_fill_scalar(p, done, n, dt, dist, a, b, key, check, diff);
}

/* ---- comparison with tolerance ------------------------------------------------- */

/* The value of an element of dtype dt given its bits. */
__device__ __forceinline__ double ka_bits_value(int dt, ka_u64 v) {
  switch (dt) {
    case 0:
      return __uint_as_float((ka_u32)v);
    case 1:
      return __longlong_as_double((long long)v);
    case 2:
      return ka_h2f((unsigned short)v);
    case 3:
      return __uint_as_float((ka_u32)v << 16);
    case 4:
      return (signed char)(unsigned char)v;
    case 5:
      return (unsigned char)v;
    case 6:
      return (int)(ka_u32)v;
    default:
      return (double)(long long)v;
  }
}
__device__ __forceinline__ int ka_finite(double v) {
  return (((ka_u64)__double_as_longlong(v) >> 52) & 0x7ff) != 0x7ff;
}

/* |v| where v is finite, else 0 (ka_trusted_absmax's term). */
__device__ __forceinline__ double ka_finite_abs(double v) {
  double m = fabs(v);
  return ka_finite(m) ? m : 0.0;
}

/* The largest finite |element| of this thread's share of the n elements at p (dtype
 * DT): whole 16-byte chunks where p is aligned, the rest element by element. */
template <int DT>
__device__ double ka_absmax_part(const unsigned char *p, ka_u64 n) {
  constexpr int ES = ka_dt<DT>::es, V = ka_dt<DT>::per_chunk;
  double m = 0;
  ka_u64 done = 0;
  if (ka_aligned16(p, p)) {
    const ka_u128 *__restrict__ q = (const ka_u128 *)p;
    done = n / V * V;
    KA_FOR_CHUNKS(n / V, {
      ka_u128 c = q[k];
#pragma unroll
      for (int j = 0; j < V; j++) m = fmax(m, ka_finite_abs(ka_bits_value(DT, ka_part<ES>(c, j))));
    });
  }
  KA_FOR4(done, n, m = fmax(m, ka_finite_abs(ka_bits_value(DT, ka_load_bits(p, i, ES)))););
  return m;
}

/* Raises *out (the bits of a non-negative double) to the largest finite |element| of
 * the n elements at p. Non-negative doubles order as their bit patterns. */
extern "C" __global__ void ka_trusted_absmax(const unsigned char *p, ka_u64 n, int dt,
                                             ka_u64 *out) {
  double m;
  switch (dt) {
    case 0:
      m = ka_absmax_part<0>(p, n);
      break;
    case 1:
      m = ka_absmax_part<1>(p, n);
      break;
    case 2:
      m = ka_absmax_part<2>(p, n);
      break;
    case 3:
      m = ka_absmax_part<3>(p, n);
      break;
    case 4:
      m = ka_absmax_part<4>(p, n);
      break;
    case 5:
      m = ka_absmax_part<5>(p, n);
      break;
    case 6:
      m = ka_absmax_part<6>(p, n);
      break;
    default:
      m = ka_absmax_part<7>(p, n);
      break;
  }
  for (int o = 16; o > 0; o >>= 1) m = fmax(m, __shfl_down_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0 && m > 0) atomicMax(out, (ka_u64)__double_as_longlong(m));
}

/* Whether the bits v of dtype DT are a NaN (IEEE 754 binary32, binary64, binary16 and
 * bfloat16 layouts: all exponent bits set, a fraction not zero). */
template <int DT>
__device__ __forceinline__ bool ka_nan_bits(ka_u64 v) {
  if constexpr (DT == 0)
    return (v & 0x7fffffffull) > 0x7f800000ull;
  else if constexpr (DT == 1)
    return (v & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
  else if constexpr (DT == 2)
    return (v & 0x7fffull) > 0x7c00ull;
  else if constexpr (DT == 3)
    return (v & 0x7fffull) > 0x7f80ull;
  else
    return false;
}

/* Whether element i of got (bits g) fails against want's (bits w), dtype DT (see
 * ka_trusted_close). */
template <int DT>
__device__ __forceinline__ bool ka_fails(ka_u64 w, ka_u64 g, ka_u64 i, double abs_tol, double rtol,
                                         int poison, ka_u64 pkey) {
  if (w == g) /* equal bits: equal values, or the same NaN (still poison, perhaps) */
    return poison && ka_nan_bits<DT>(g) && g == ka_poison(i, DT, pkey);
  double a = ka_bits_value(DT, w), v = ka_bits_value(DT, g);
  if (a != a && v != v) return poison && g == ka_poison(i, DT, pkey);
  if (a == v) return false;
  if (!ka_finite(a) || !ka_finite(v)) return true; /* an unmatched infinity: rtol x |Inf| would let anything pass */
  return !(fabs(v - a) <= abs_tol + rtol * fabs(a));
}

/* ka_trusted_close's count and first index over this thread's share, dtype DT: whole
 * 16-byte chunks where both buffers are aligned, the rest element by element. */
template <int DT>
__device__ void ka_close_part(const unsigned char *want, const unsigned char *got, ka_u64 n,
                              double abs_tol, double rtol, int poison, ka_u64 pkey, ka_u64 *bad,
                              ka_u64 *first) {
  constexpr int ES = ka_dt<DT>::es, V = ka_dt<DT>::per_chunk;
  ka_u64 done = 0, nb = 0, f = ~0ull;
  if (ka_aligned16(want, got)) {
    const ka_u128 *__restrict__ qw = (const ka_u128 *)want;
    const ka_u128 *__restrict__ qg = (const ka_u128 *)got;
    done = n / V * V;
    KA_FOR_CHUNKS(n / V, {
      ka_u128 cw = qw[k], cg = qg[k];
#pragma unroll
      for (int j = 0; j < V; j++) {
        ka_u64 e = k * V + j;
        if (ka_fails<DT>(ka_part<ES>(cw, j), ka_part<ES>(cg, j), e, abs_tol, rtol, poison, pkey)) {
          nb++;
          f = e < f ? e : f;
        }
      }
    });
  }
  KA_FOR4(done, n, {
    if (ka_fails<DT>(ka_load_bits(want, i, ES), ka_load_bits(got, i, ES), i, abs_tol, rtol, poison,
                     pkey)) {
      nb++;
      f = i < f ? i : f;
    }
  });
  *bad = nb, *first = f;
}

/* Counts the elements of got that differ from want (both n elements of dtype dt): equal
 * values match (an infinity only an equal one); NaN matches NaN unless got's element is
 * still the poison that the generator gives under pkey (poison 1); otherwise
 * |got - want| must be at most abs_tol s + rtol |want|, where s is the double at *scale
 * (ka_trusted_absmax's result, read on the device) or 1 where that is not above 0.
 * out[0] += the count; out[1] lowered to the first index that differs (the caller sets
 * it to ~0 first). */
extern "C" __global__ void ka_trusted_close(const unsigned char *want, const unsigned char *got,
                                            ka_u64 n, int dt, double abs_tol, double rtol,
                                            int poison, ka_u64 pkey, const ka_u64 *scale,
                                            ka_u64 *out) {
  double sc = __longlong_as_double((long long)*scale);
  abs_tol = abs_tol * (sc > 0 ? sc : 1.0);
  ka_u64 bad = 0, first = ~0ull;
  switch (dt) {
    case 0:
      ka_close_part<0>(want, got, n, abs_tol, rtol, poison, pkey, &bad, &first);
      break;
    case 1:
      ka_close_part<1>(want, got, n, abs_tol, rtol, poison, pkey, &bad, &first);
      break;
    case 2:
      ka_close_part<2>(want, got, n, abs_tol, rtol, poison, pkey, &bad, &first);
      break;
    case 3:
      ka_close_part<3>(want, got, n, abs_tol, rtol, poison, pkey, &bad, &first);
      break;
    case 4:
      ka_close_part<4>(want, got, n, abs_tol, rtol, poison, pkey, &bad, &first);
      break;
    case 5:
      ka_close_part<5>(want, got, n, abs_tol, rtol, poison, pkey, &bad, &first);
      break;
    case 6:
      ka_close_part<6>(want, got, n, abs_tol, rtol, poison, pkey, &bad, &first);
      break;
    default:
      ka_close_part<7>(want, got, n, abs_tol, rtol, poison, pkey, &bad, &first);
      break;
  }
  for (int o = 16; o > 0; o >>= 1) {
    bad += __shfl_down_sync(0xffffffffu, bad, o);
    ka_u64 f = __shfl_down_sync(0xffffffffu, first, o);
    first = f < first ? f : first;
  }
  if ((threadIdx.x & 31) == 0 && bad) {
    atomicAdd(&out[0], bad);
    atomicMin(&out[1], first);
  }
}
