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

/* splitmix64's finalizer (Steele, Lea, Flood, OOPSLA 2014). */
__device__ __forceinline__ ka_u64 ka_mix(ka_u64 z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* A grid-stride loop over i < n taking four indices a thread apart in each turn (i,
 * i + stride, ...), unrolled, so that a thread has four independent loads or element
 * computations in flight: one 4-byte access at a time per thread leaves too few bytes in
 * flight to reach the H200's memory bandwidth (Little's law; measured with
 * bench/trusted_ops.c: ~1.3 TB/s). The body (the macro's rest) uses i. */
#define KA_FOR4(n, ...)                                                             \
  do {                                                                              \
    ka_u64 ka_stride_ = (ka_u64)gridDim.x * blockDim.x;                             \
    for (ka_u64 ka_b_ = (ka_u64)blockIdx.x * blockDim.x + threadIdx.x; ka_b_ < (n); \
         ka_b_ += 4 * ka_stride_) {                                                 \
      _Pragma("unroll") for (int ka_k_ = 0; ka_k_ < 4; ka_k_++) {                   \
        ka_u64 i = ka_b_ + (ka_u64)ka_k_ * ka_stride_;                              \
        if (i < (n)) {                                                              \
          __VA_ARGS__                                                               \
        }                                                                           \
      }                                                                             \
    }                                                                               \
  } while (0)

/* Chris Wellons' lowbias32 integer hash (2018, "Prospecting for Hash Functions"). */
__device__ __forceinline__ ka_u32 ka_mix32(ka_u32 x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  return x ^ (x >> 16);
}

/* The odd 32-bit weight of word (or tail byte) i under key (trusted_kernels.h). */
__device__ __forceinline__ ka_u32 ka_weight(ka_u64 i, ka_u64 key) {
  ka_u32 hi = ka_mix32((ka_u32)(i >> 32) ^ (ka_u32)(key >> 32));
  return ka_mix32((ka_u32)i ^ (ka_u32)key ^ hi) | 1u;
}

/* Adds to *sum a keyed checksum of the n bytes at a (trusted_kernels.h). */
extern "C" __global__ void ka_trusted_sum(const unsigned char *a, ka_u64 n, ka_u64 key,
                                          ka_u64 *sum) {
  const ka_u32 *__restrict__ w = (const ka_u32 *)a;
  ka_u64 nw = n >> 2, acc = 0;
  ka_u64 i0 = (ka_u64)blockIdx.x * blockDim.x + threadIdx.x;
  KA_FOR4(nw, acc += (ka_u64)w[i] * ka_weight(i, key););
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

/* Poison of dtype dt out of the words x: a quiet NaN with a random payload for floats,
 * random bits for integers (common/data.c ka_fill_poison's patterns). */
__device__ __forceinline__ ka_u64 ka_poison_of(int dt, const ka_u32 *x) {
  ka_u64 r = (((ka_u64)x[0]) << 32) | x[1];
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

/* Element i of the generated tensor (dist 3: poison) as dtype bits. Poison needs no
 * secrecy beyond its call (the candidate reads it in its outputs), only a pattern per
 * call and element: splitmix64's finalizer of (key, i) instead of Philox. */
__device__ __forceinline__ ka_u64 ka_element(ka_u64 i, int dt, int dist, double a, double b,
                                             ka_u64 key) {
  ka_u32 x[4];
  if (dist == 3) {
    ka_u64 r = ka_mix(key ^ (i * 0x9e3779b97f4a7c15ull));
    x[0] = (ka_u32)(r >> 32), x[1] = (ka_u32)r;
    return ka_poison_of(dt, x);
  }
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

/* Elements 4j .. 4j + 3 of a fast normal tensor (dist 4, f32/f16/bf16 only): one counter,
 * two Box-Muller pairs (Box and Muller, Ann. Math. Statist. 29(2), 1958) in single
 * precision with the hardware's approximate logarithm and sine/cosine (CUDA C++
 * Programming Guide, "Intrinsic Functions": __logf, __sincosf). Not the host's bits: for
 * the inputs of timed calls only, which never leave the device (their outputs are
 * verified against the baseline's on the same inputs). u1 in (0, 1], so the logarithm
 * is finite. */
__device__ __forceinline__ void ka_fast_normal4(ka_u64 j, int dt, float a, float b, ka_u64 key,
                                                ka_u64 *v) {
  ka_u32 x[4];
  ka_gen(j, key, x);
#pragma unroll
  for (int h = 0; h < 2; h++) {
    float u1 = ((float)(x[2 * h] >> 8) + 1.0f) * 5.9604644775390625e-8f; /* 2^-24 */
    float u2 = (float)(x[2 * h + 1] >> 8) * 5.9604644775390625e-8f;
    float r = b * sqrtf(-2.0f * __logf(u1)), sn, cs;
    __sincosf(6.2831853071795865f * u2, &sn, &cs);
    float f0 = a + r * cs, f1 = a + r * sn;
    v[2 * h] = dt == 0 ? __float_as_uint(f0) : dt == 2 ? ka_f2h(f0) : ka_f2bf(f0);
    v[2 * h + 1] = dt == 0 ? __float_as_uint(f1) : dt == 2 ? ka_f2h(f1) : ka_f2bf(f1);
  }
}

/* check 0: writes the n generated elements at p. check 1: sets *diff to 1 if any
 * element at p differs from what would be written (untouched otherwise). */
extern "C" __global__ void ka_trusted_fill(unsigned char *p, ka_u64 n, int dt, int dist, double a,
                                           double b, ka_u64 key, int check, unsigned *diff) {
  int es = ka_es(dt);
  unsigned bad = 0;
  if (dist == 4) { /* fast normal, by fours (ka_fast_normal4) */
    ka_u64 nq = (n + 3) >> 2;
    KA_FOR4(nq, {
      ka_u64 v[4];
      ka_fast_normal4(i, dt, (float)a, (float)b, key, v);
      for (int k = 0; k < 4; k++) {
        ka_u64 e = 4 * i + k;
        if (e >= n) break;
        if (check)
          bad |= ka_load_bits(p, e, es) != v[k];
        else
          ka_store_bits(p, e, es, v[k]);
      }
    });
  } else if (dist == 0) { /* by pairs: one counter and logarithm for two elements */
    ka_u64 np = (n + 1) >> 1;
    KA_FOR4(np, {
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
    KA_FOR4(n, bad |= ka_load_bits(p, i, es) != ka_element(i, dt, dist, a, b, key););
  } else {
    KA_FOR4(n, ka_store_bits(p, i, es, ka_element(i, dt, dist, a, b, key)););
  }
  if (bad) *diff = 1u;
}

/* ---- comparison with tolerance ------------------------------------------------- */

__device__ __forceinline__ double ka_load_value(const unsigned char *p, ka_u64 i, int dt) {
  switch (dt) {
    case 0:
      return ((const float *)p)[i];
    case 1:
      return ((const double *)p)[i];
    case 2:
      return ka_h2f(((const unsigned short *)p)[i]);
    case 3:
      return __uint_as_float(((ka_u32)((const unsigned short *)p)[i]) << 16);
    case 4:
      return ((const signed char *)p)[i];
    case 5:
      return p[i];
    case 6:
      return ((const int *)p)[i];
    default:
      return (double)((const long long *)p)[i];
  }
}
__device__ __forceinline__ int ka_finite(double v) {
  return (((ka_u64)__double_as_longlong(v) >> 52) & 0x7ff) != 0x7ff;
}

/* Raises *out (the bits of a non-negative double) to the largest finite |element| of
 * the n elements at p. Non-negative doubles order as their bit patterns. */
extern "C" __global__ void ka_trusted_absmax(const unsigned char *p, ka_u64 n, int dt,
                                             ka_u64 *out) {
  double m = 0;
  KA_FOR4(n, {
    double v = fabs(ka_load_value(p, i, dt));
    if (ka_finite(v) && v > m) m = v;
  });
  for (int o = 16; o > 0; o >>= 1) m = fmax(m, __shfl_down_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0 && m > 0) atomicMax(out, (ka_u64)__double_as_longlong(m));
}

/* Counts the elements of got that differ from want (both n elements of dtype dt): equal
 * values match (an infinity only an equal one); NaN matches NaN unless got's element is still the
 * poison that the generator gives under pkey (poison 1); otherwise |got - want| must be at most
 * abs_tol + rtol |want|. out[0] += the count; out[1] lowered to the first index that
 * differs (the caller sets it to ~0 first). */
extern "C" __global__ void ka_trusted_close(const unsigned char *want, const unsigned char *got,
                                            ka_u64 n, int dt, double abs_tol, double rtol,
                                            int poison, ka_u64 pkey, ka_u64 *out) {
  int es = ka_es(dt);
  ka_u64 bad = 0, first = ~0ull;
  KA_FOR4(n, {
    double a = ka_load_value(want, i, dt), g = ka_load_value(got, i, dt);
    int b;
    if (a != a && g != g)
      b = poison && ka_load_bits(got, i, es) == ka_element(i, dt, 3, 0, 0, pkey);
    else if (a == g)
      b = 0;
    else if (!ka_finite(a) || !ka_finite(g))
      b = 1; /* an unmatched infinity: rtol x |Inf| would let anything pass */
    else
      b = !(fabs(g - a) <= abs_tol + rtol * fabs(a));
    if (b) {
      bad++;
      if (i < first) first = i;
    }
  });
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
