#include "data.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ka_common.h"

static uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

uint64_t ka_mix64(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9e3779b97f4a7c15ULL * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void ka_rng_seed(ka_rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = ka_mix64(seed, (uint64_t)i);
}

uint64_t ka_rng_next(ka_rng *r) {
  uint64_t *s = r->s;
  uint64_t res = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return res;
}

double ka_rng_uniform(ka_rng *r) {
  return (double)(ka_rng_next(r) >> 11) * 0x1.0p-53;
}

uint16_t ka_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

float ka_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void store(ka_dtype dt, void *buf, int64_t i, double v) {
  switch (dt) {
    case KA_DT_F32:
      ((float *)buf)[i] = (float)v;
      break;
    case KA_DT_F64:
      ((double *)buf)[i] = v;
      break;
    case KA_DT_F16:
      ((_Float16 *)buf)[i] = (_Float16)v;
      break;
    case KA_DT_BF16:
      ((uint16_t *)buf)[i] = ka_f32_to_bf16((float)v);
      break;
    case KA_DT_I8:
      ((int8_t *)buf)[i] = (int8_t)v;
      break;
    case KA_DT_U8:
      ((uint8_t *)buf)[i] = (uint8_t)v;
      break;
    case KA_DT_I32:
      ((int32_t *)buf)[i] = (int32_t)v;
      break;
    case KA_DT_I64:
      ((int64_t *)buf)[i] = (int64_t)v;
      break;
  }
}

double ka_load_double(ka_dtype dt, const void *buf, int64_t i) {
  switch (dt) {
    case KA_DT_F32:
      return ((const float *)buf)[i];
    case KA_DT_F64:
      return ((const double *)buf)[i];
    case KA_DT_F16:
      return (double)((const _Float16 *)buf)[i];
    case KA_DT_BF16:
      return ka_bf16_to_f32(((const uint16_t *)buf)[i]);
    case KA_DT_I8:
      return ((const int8_t *)buf)[i];
    case KA_DT_U8:
      return ((const uint8_t *)buf)[i];
    case KA_DT_I32:
      return ((const int32_t *)buf)[i];
    case KA_DT_I64:
      return (double)((const int64_t *)buf)[i];
  }
  return NAN;
}

/* ---- the counter-based input generator (data.h): the same definition as the trusted
 * device kernel ka_trusted_fill (gpuexec/backends/trusted_kernels.cu), operation for operation:
 * only IEEE-754 double additions, multiplications, divisions and square roots, each
 * rounded once (no fused multiply-add: common/CMakeLists.txt builds this file with
 * -ffp-contract=off, and the kernel spells every operation as an __d*_rn intrinsic), so
 * host and device draw the same bits. Integer dtypes: the task's bounds must lie in the
 * dtype's range (a value outside it converts differently on the two sides). */

static inline void gen_philox(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    if (r) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c0 = n0;
    c1 = (uint32_t)p1;
    c2 = n2;
    c3 = (uint32_t)p0;
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

void ka_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  gen_philox(ctr, key, out);
}

uint64_t ka_fill_key(uint64_t seed, int case_index, int tensor_index) {
  return ka_mix64(ka_mix64(seed, (uint64_t)case_index), (uint64_t)tensor_index);
}

/* ln x for 0 < x <= 1 (normal numbers): x = m 2^e with m in [sqrt(1/2), sqrt(2)), then
 * ln m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.1716, by its series to s^15
 * (relative error below 1e-13: inputs need a normal distribution, not last-bit
 * logarithms; four terms fewer than before issue 15 made the device draw faster), plus
 * e ln 2. */
static inline double gen_log(double x) {
  uint64_t u;
  memcpy(&u, &x, 8);
  int e = (int)((u >> 52) & 0x7ff) - 1023;
  u = (u & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL;
  double m;
  memcpy(&m, &u, 8);
  if (m > 1.4142135623730951) m = m * 0.5, e = e + 1;
  double s = (m - 1.0) / (m + 1.0), z = s * s;
  double p = 0.06666666666666667;
  p = p * z + 0.07692307692307693;
  p = p * z + 0.09090909090909091;
  p = p * z + 0.1111111111111111;
  p = p * z + 0.14285714285714285;
  p = p * z + 0.2;
  p = p * z + 0.3333333333333333;
  p = p * z + 1.0;
  return (double)e * 0.6931471805599453 + 2.0 * s * p;
}

double ka_gen_log(double x) {
  return gen_log(x);
}

/* cos(2 pi u) for 0 <= u < 1: u = q/4 + r with |r| <= 1/8 (exact), a = 2 pi r, then the
 * cosine or sine series of a (|a| <= pi/4) to a^14 / a^13 (error below 1e-13). */
static inline double gen_cos2pi(double u) {
  int q = (int)(u * 4.0 + 0.5);
  double r = u - (double)q * 0.25, a = r * 6.283185307179586, z = a * a, p;
  if (q & 1) {
    p = 1.6059043836821613e-10;
    p = p * z + -2.505210838544172e-08;
    p = p * z + 2.7557319223985893e-06;
    p = p * z + -0.0001984126984126984;
    p = p * z + 0.008333333333333333;
    p = p * z + -0.16666666666666666;
    p = p * z + 1.0;
    p = a * p; /* sin a */
    return (q & 3) == 1 ? -p : p;
  }
  p = -1.1470745597729725e-11;
  p = p * z + 2.08767569878681e-09;
  p = p * z + -2.755731922398589e-07;
  p = p * z + 2.48015873015873e-05;
  p = p * z + -0.001388888888888889;
  p = p * z + 0.041666666666666664;
  p = p * z + -0.5;
  p = p * z + 1.0; /* cos a */
  return (q & 3) == 2 ? -p : p;
}

double ka_gen_cos2pi(double u) {
  return gen_cos2pi(u);
}

/* Chris Wellons' lowbias32 integer hash (2018, "Prospecting for Hash Functions"). */
static uint32_t gen_mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  return x ^ (x >> 16);
}

/* The random bits of poison element i under key (data.h KA_GEN_POISON); wide for 8-byte
 * dtypes. */
static uint64_t gen_poison_bits(uint64_t i, uint64_t key, int wide) {
  uint32_t hi = gen_mix32((uint32_t)(i >> 32) ^ (uint32_t)(key >> 32));
  uint32_t lo = gen_mix32((uint32_t)i ^ (uint32_t)key ^ hi);
  return wide ? ((uint64_t)gen_mix32(lo + 0x9e3779b9u) << 32) | lo : lo;
}

uint64_t ka_gen_bits(uint64_t i, ka_dtype dt, int dist, double a, double b, uint64_t key) {
  if (dist == KA_GEN_POISON) {
    uint64_t r = gen_poison_bits(i, key, ka_dtype_size(dt) == 8);
    switch (dt) {
      case KA_DT_F32:
        return 0x7fc00000u | (uint32_t)(r & 0x3fffffu) | 1u;
      case KA_DT_F64:
        return 0x7ff8000000000000ULL | (r & 0x7ffffffffffffULL) | 1u;
      case KA_DT_F16:
        return (uint16_t)(0x7e00u | (r & 0x1ffu) | 1u);
      case KA_DT_BF16:
        return (uint16_t)(0x7fc0u | (r & 0x3fu) | 1u);
      case KA_DT_I8:
      case KA_DT_U8:
        return r & 0xffu;
      case KA_DT_I32:
        return r & 0xffffffffu;
      default:
        return r;
    }
  }
  /* normal: elements 2p and 2p + 1 are the pair of Box-Muller values of counter p */
  uint64_t c = dist == KA_DIST_NORMAL ? i >> 1 : i;
  uint32_t ctr[4] = {(uint32_t)c, (uint32_t)(c >> 32), 0x6b61u, 0u};
  uint32_t k[2] = {(uint32_t)key, (uint32_t)(key >> 32)}, x[4];
  gen_philox(ctr, k, x);
  uint64_t r = ((uint64_t)x[0] << 32) | x[1];
  double u1 = (double)(r >> 11) * 1.1102230246251565e-16;
  double u2 = (double)(((((uint64_t)x[2]) << 32) | x[3]) >> 11) * 1.1102230246251565e-16;
  double v;
  if (dist == KA_DIST_NORMAL) /* sin 2 pi u = cos 2 pi |u - 1/4| (exact argument) */
    v = a + b * (sqrt(-2.0 * gen_log(1.0 - u1)) * gen_cos2pi((i & 1) ? fabs(u2 - 0.25) : u2));
  else if (dist == KA_DIST_UNIFORM)
    v = a + (b - a) * u1;
  else
    v = ceil(a) + floor(u1 * (floor(b) - ceil(a) + 1.0));
  unsigned char buf[8] = {0};
  store(dt, buf, 0, v);
  if (dt == KA_DT_F16) { /* through f32, as the device converts */
    _Float16 h = (_Float16)(float)v;
    memcpy(buf, &h, 2);
  }
  uint64_t bits = 0;
  memcpy(&bits, buf, 8);
  return bits;
}

/* Inputs are drawn in chunks of KA_FILL_CHUNK elements on several threads; every element
 * depends only on (key, index), never on how many threads drew it. */
#define KA_FILL_CHUNK ((int64_t)1 << 20)
#define KA_FILL_MAX_THREADS 32

/* Element i of buf = v as ka_gen_bits stores it (f16 through f32). */
static inline void gen_put(ka_dtype dt, void *buf, int64_t i, double v) {
  if (dt == KA_DT_F32)
    ((float *)buf)[i] = (float)v;
  else if (dt == KA_DT_F16)
    ((_Float16 *)buf)[i] = (_Float16)(float)v;
  else
    store(dt, buf, i, v);
}

/* ka_gen_bits's uniform of a 64-bit Philox word x, (x >> 11) 2^-53, exactly, without a
 * 64-bit integer conversion (which SSE2 and AVX2 lack, so a loop holding one does not
 * vectorize): with m = x >> 11 (53 bits), 1 + (m >> 1) 2^-52 is a double by its bits,
 * less 1 exactly, plus the low bit's 2^-53 exactly (the sum has 53 bits). */
static inline __attribute__((always_inline)) double gen_u53(uint64_t x) {
  x >>= 11;
  uint64_t b = 0x3ff0000000000000ULL | (x >> 1);
  double d;
  memcpy(&d, &b, 8);
  return (d - 1.0) + (double)(int)(x & 1) * 1.1102230246251565e-16;
}
/* (double) of x < 2^31, exactly, by the same bits trick (2^52 + x, less 2^52). */
static inline __attribute__((always_inline)) double gen_small(uint64_t x) {
  uint64_t b = 0x4330000000000000ULL | x;
  double d;
  memcpy(&d, &b, 8);
  return d - 4503599627370496.0;
}
/* gen_cos2pi with both series computed and one chosen (no branch). */
static inline __attribute__((always_inline)) double gen_cos2pi_nb(double u) {
  int q = (int)(u * 4.0 + 0.5);
  double r = u - (double)q * 0.25, t = r * 6.283185307179586, z = t * t;
  double sn = 1.6059043836821613e-10;
  sn = sn * z + -2.505210838544172e-08;
  sn = sn * z + 2.7557319223985893e-06;
  sn = sn * z + -0.0001984126984126984;
  sn = sn * z + 0.008333333333333333;
  sn = sn * z + -0.16666666666666666;
  sn = sn * z + 1.0;
  sn = t * sn; /* sin t */
  double cs = -1.1470745597729725e-11;
  cs = cs * z + 2.08767569878681e-09;
  cs = cs * z + -2.755731922398589e-07;
  cs = cs * z + 2.48015873015873e-05;
  cs = cs * z + -0.001388888888888889;
  cs = cs * z + 0.041666666666666664;
  cs = cs * z + -0.5;
  cs = cs * z + 1.0; /* cos t */
  double c = (q & 1) ? sn : cs;
  return (q & 3) == 1 || (q & 3) == 2 ? -c : c;
}

/* The normal values of GEN_BLOCK pairs p0 .. p0 + GEN_BLOCK - 1 under key k into
 * v[2 GEN_BLOCK]: elements 2p and 2p + 1 share counter p's Philox block and Box-Muller
 * radius, computed once here (ka_gen_bits, which draws one element, computes them for
 * each). The same operations in the same order as ka_gen_bits, lane by lane (gen_philox,
 * gen_log, gen_cos2pi written out without branches: both series of the cosine are
 * computed and one is chosen, which rounds nothing differently), so the same bits
 * (common_test checks every dtype against ka_gen_bits). Each stage is a loop over the
 * block that the compiler vectorizes (data.c is built with -O3 and -ffp-contract=off):
 * vector lanes round each IEEE-754 operation as the scalar unit does. */
#define GEN_BLOCK 16
static inline __attribute__((always_inline)) void gen_normal_block(const uint32_t k[2], int64_t p0,
                                                                   double a, double b,
                                                                   double *restrict v) {
  uint32_t c0[GEN_BLOCK], c1[GEN_BLOCK], c2[GEN_BLOCK], c3[GEN_BLOCK];
  for (int j = 0; j < GEN_BLOCK; j++) {
    uint64_t c = (uint64_t)(p0 + j);
    c0[j] = (uint32_t)c, c1[j] = (uint32_t)(c >> 32), c2[j] = 0x6b61u, c3[j] = 0u;
  }
  uint32_t k0[10], k1[10]; /* gen_philox's key schedule */
  k0[0] = k[0], k1[0] = k[1];
  for (int r = 1; r < 10; r++) k0[r] = k0[r - 1] + 0x9E3779B9u, k1[r] = k1[r - 1] + 0xBB67AE85u;
  for (int j = 0; j < GEN_BLOCK; j++) /* gen_philox, lane by lane */
    for (int r = 0; r < 10; r++) {
      uint64_t q0 = (uint64_t)0xD2511F53u * c0[j], q1 = (uint64_t)0xCD9E8D57u * c2[j];
      uint32_t n0 = (uint32_t)(q1 >> 32) ^ c1[j] ^ k0[r], n2 = (uint32_t)(q0 >> 32) ^ c3[j] ^ k1[r];
      c0[j] = n0, c1[j] = (uint32_t)q1, c2[j] = n2, c3[j] = (uint32_t)q0;
    }
  double rad[GEN_BLOCK], u2[GEN_BLOCK];
  for (int j = 0; j < GEN_BLOCK; j++) { /* the radius: sqrt(-2 gen_log(1 - u1)) */
    double u1 = gen_u53(((uint64_t)c0[j] << 32) | c1[j]);
    u2[j] = gen_u53(((uint64_t)c2[j] << 32) | c3[j]);
    double x = 1.0 - u1, m;
    uint64_t u;
    memcpy(&u, &x, 8);
    double e = gen_small((u >> 52) & 0x7ff) - 1023.0; /* (double) of gen_log's int e */
    u = (u & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL;
    memcpy(&m, &u, 8);
    int big = m > 1.4142135623730951;
    m = big ? m * 0.5 : m;
    e = big ? e + 1.0 : e;
    double s = (m - 1.0) / (m + 1.0), z = s * s;
    double q = 0.06666666666666667;
    q = q * z + 0.07692307692307693;
    q = q * z + 0.09090909090909091;
    q = q * z + 0.1111111111111111;
    q = q * z + 0.14285714285714285;
    q = q * z + 0.2;
    q = q * z + 0.3333333333333333;
    q = q * z + 1.0;
    rad[j] = sqrt(-2.0 * (e * 0.6931471805599453 + 2.0 * s * q));
  }
  for (int j = 0; j < GEN_BLOCK; j++) {
    v[2 * j] = a + b * (rad[j] * gen_cos2pi_nb(u2[j]));
    v[2 * j + 1] = a + b * (rad[j] * gen_cos2pi_nb(fabs(u2[j] - 0.25)));
  }
}

/* gen_normal_block for CPUs with AVX2 (4 doubles a vector, against SSE2's 2; the same
 * bits, since no operation is fused), chosen once at run time by gen_block_fn. */
#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2"))) static void gen_block_avx2(const uint32_t k[2], int64_t p0,
                                                           double a, double b, double *v) {
  gen_normal_block(k, p0, a, b, v);
}
#endif
static void gen_block_base(const uint32_t k[2], int64_t p0, double a, double b, double *v) {
  gen_normal_block(k, p0, a, b, v);
}
typedef void (*gen_block_t)(const uint32_t[2], int64_t, double, double, double *);
/* The block function of this CPU: AVX2 where it has it, unless KA_FILL_BASE=1 (tests run
 * the base one too: common_test_base). */
static gen_block_t gen_block_fn(void) {
  const char *base = getenv("KA_FILL_BASE");
  if (base && !strcmp(base, "1")) return gen_block_base;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) return gen_block_avx2;
#endif
  return gen_block_base;
}

/* Normal elements [lo, hi) under key, GEN_BLOCK pairs at a time (gen_normal_block):
 * 4-5x as fast as element by element with AVX2 on one thread (bench/fill_bench). */
static void fill_normal(ka_dtype dt, void *buf, int64_t lo, int64_t hi, double a, double b,
                        uint64_t key) {
  static gen_block_t block; /* racing threads store the same pointer */
  gen_block_t fn = __atomic_load_n(&block, __ATOMIC_RELAXED);
  if (!fn) __atomic_store_n(&block, fn = gen_block_fn(), __ATOMIC_RELAXED);
  uint32_t k[2] = {(uint32_t)key, (uint32_t)(key >> 32)};
  int64_t p0 = lo >> 1, p1 = (hi + 1) >> 1; /* the pairs that [lo, hi) touches */
  double v[2 * GEN_BLOCK];
  for (int64_t p = p0; p < p1; p += GEN_BLOCK) {
    fn(k, p, a, b, v); /* pairs past p1 are drawn and dropped */
    int64_t e0 = 2 * p, e1 = 2 * (p + GEN_BLOCK);
    if (e0 < lo) e0 = lo;
    if (e1 > hi) e1 = hi;
    if (dt == KA_DT_F32)
      for (int64_t i = e0; i < e1; i++) ((float *)buf)[i] = (float)v[i - 2 * p];
    else
      for (int64_t i = e0; i < e1; i++) gen_put(dt, buf, i, v[i - 2 * p]);
  }
}

/* Set when a vector draw ever disagreed with ka_gen_bits (a miscompiled or misbehaving
 * vector unit): every later normal draw is element by element, the definition itself. */
static int gen_vector_off;

int ka_fill_vector_ok(void) {
  return !__atomic_load_n(&gen_vector_off, __ATOMIC_RELAXED);
}

/* Whether elements lo, hi - 1 and their midpoint of buf are ka_gen_bits's: the vector
 * draw checked against its definition, three elements of every chunk (the device's
 * spot check compares its own draw with ka_gen_bits, never with this buffer). */
static int fill_spot_ok(const ka_tensor_spec *spec, const void *buf, int64_t lo, int64_t hi,
                        uint64_t key) {
  size_t es = ka_dtype_size(spec->dtype);
  int64_t at[3] = {lo, lo + (hi - lo) / 2, hi - 1};
  for (int j = 0; j < 3; j++) {
    uint64_t bits =
        ka_gen_bits((uint64_t)at[j], spec->dtype, (int)spec->dist, spec->a, spec->b, key);
    if (memcmp((const unsigned char *)buf + (size_t)at[j] * es, &bits, es)) return 0;
  }
  return 1;
}

static void fill_chunk(const ka_tensor_spec *spec, void *buf, int64_t lo, int64_t hi,
                       uint64_t key) {
  if (spec->dist == KA_DIST_NORMAL && !__atomic_load_n(&gen_vector_off, __ATOMIC_RELAXED)) {
    fill_normal(spec->dtype, buf, lo, hi, spec->a, spec->b, key);
    if (hi <= lo || fill_spot_ok(spec, buf, lo, hi, key)) return;
    if (!__atomic_exchange_n(&gen_vector_off, 1, __ATOMIC_RELAXED))
      fprintf(stderr,
              "kernelarena: the vector input draw disagrees with its definition on this "
              "CPU; drawing element by element from now on\n");
  }
  size_t es = ka_dtype_size(spec->dtype);
  for (int64_t i = lo; i < hi; i++) {
    uint64_t bits = ka_gen_bits((uint64_t)i, spec->dtype, (int)spec->dist, spec->a, spec->b, key);
    memcpy((unsigned char *)buf + (size_t)i * es, &bits, es);
  }
}

typedef struct fill_job {
  const ka_tensor_spec *spec;
  void *buf;
  int64_t elems, nchunks;
  uint64_t base;
  int64_t next; /* next chunk to draw; atomically incremented */
} fill_job;

static void *fill_thread(void *arg) {
  fill_job *j = arg;
  for (;;) {
    int64_t c = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
    if (c >= j->nchunks) return NULL;
    int64_t lo = c * KA_FILL_CHUNK,
            hi = lo + KA_FILL_CHUNK < j->elems ? lo + KA_FILL_CHUNK : j->elems;
    fill_chunk(j->spec, j->buf, lo, hi, j->base);
  }
}

void ka_fill_input(const ka_tensor_spec *spec, void *buf, int64_t elems, uint64_t seed,
                   int case_index, int tensor_index) {
  /* bounds given as expressions over params take this case's values */
  ka_tensor_spec resolved;
  const ka_task *t = spec->task;
  if ((spec->init_expr[0] || spec->init_expr[1]) && t && spec >= t->tensors &&
      spec < t->tensors + t->ntensors && case_index >= 0 && case_index < t->ncases + t->nheld) {
    resolved = *spec;
    char e[256];
    if (ka_task_init_bounds(t, (int)(spec - t->tensors), &t->cases[case_index], &resolved.a,
                            &resolved.b, e, sizeof e) == KA_OK)
      spec = &resolved;
  }
  fill_job j = {spec,
                buf,
                elems,
                (elems + KA_FILL_CHUNK - 1) / KA_FILL_CHUNK,
                ka_fill_key(seed, case_index, tensor_index),
                0};
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int nthreads = (int)(j.nchunks < ncpu ? j.nchunks : ncpu);
  if (nthreads > KA_FILL_MAX_THREADS) nthreads = KA_FILL_MAX_THREADS;
  pthread_t th[KA_FILL_MAX_THREADS];
  int started = 0;
  for (int i = 1; i < nthreads; i++) {
    if (pthread_create(&th[started], NULL, fill_thread, &j) != 0) break; /* fewer threads */
    started++;
  }
  fill_thread(&j); /* the calling thread draws too; alone if no thread could start */
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
}

void ka_fill_poison(ka_dtype dt, void *buf, int64_t elems, uint64_t seed) {
  ka_rng r;
  ka_rng_seed(&r, seed);
  size_t es = ka_dtype_size(dt);
  unsigned char *b = buf;
  for (int64_t i = 0; i < elems; i++) {
    uint64_t x = ka_rng_next(&r);
    switch (dt) {
      case KA_DT_F32: {
        uint32_t u = 0x7fc00000u | (uint32_t)(x & 0x3fffffu) | 1u;
        memcpy(b + i * 4, &u, 4);
        break;
      }
      case KA_DT_F64: {
        uint64_t u = 0x7ff8000000000000ULL | (x & 0x7ffffffffffffULL) | 1u;
        memcpy(b + i * 8, &u, 8);
        break;
      }
      case KA_DT_F16: {
        uint16_t u = (uint16_t)(0x7e00u | (x & 0x1ffu) | 1u);
        memcpy(b + i * 2, &u, 2);
        break;
      }
      case KA_DT_BF16: {
        uint16_t u = (uint16_t)(0x7fc0u | (x & 0x3fu) | 1u);
        memcpy(b + i * 2, &u, 2);
        break;
      }
      default:
        memcpy(b + (size_t)i * es, &x, es);
        break;
    }
  }
}

/* One thread's share of ka_compare_outputs: elements [lo, hi). */
typedef struct cmp_part {
  ka_dtype dt;
  const void *out;
  const double *ref;
  int64_t lo, hi;
  double atol, rtol, scale; /* scale: pass 1 computes it; pass 2 uses the global one */
  ka_compare res;
} cmp_part;

static void *cmp_scale(void *arg) {
  cmp_part *p = arg;
  double scale = 0;
  for (int64_t i = p->lo; i < p->hi; i++)
    if (isfinite(p->ref[i]) && fabs(p->ref[i]) > scale) scale = fabs(p->ref[i]);
  p->scale = scale;
  return NULL;
}

/* The running state of one thread's comparison (cmp_range), in locals: stores through
 * the part's pointer on every element would be reloaded (the output may alias it). */
typedef struct cmp_acc {
  int64_t mismatches, nonfinite, first_bad;
  double max_abs_err, max_rel_err, first_out, first_ref;
} cmp_acc;

/* Element i (out o, reference r) into a: the rule of ka_compare_outputs. The relative
 * error's maximum is tracked by multiplication (e > max x d), dividing only when it
 * grows: the same maximum as dividing every element, without a division per element. */
static inline __attribute__((always_inline)) void cmp_elem(cmp_acc *a, int64_t i, double o,
                                                           double r, double abs_tol, double rtol,
                                                           double floor_d) {
  int bad;
  if (!isfinite(r)) {
    bad = !(isnan(r) ? isnan(o) : o == r);
  } else if (!isfinite(o)) {
    bad = 1;
    a->nonfinite++;
  } else {
    /* plain comparisons, not fmax (a libm call at -O2): r and o are finite here */
    double ar = fabs(r), e = fabs(o - r), d = ar > floor_d ? ar : floor_d;
    if (e > a->max_abs_err) a->max_abs_err = e;
    if (e > a->max_rel_err * d) {
      double rel = e / d;
      if (rel > a->max_rel_err) a->max_rel_err = rel;
    }
    bad = e > abs_tol + rtol * ar;
  }
  if (bad && a->mismatches++ == 0) a->first_bad = i, a->first_out = o, a->first_ref = r;
}

static void *cmp_range(void *arg) {
  cmp_part *p = arg;
  double abs_tol = p->atol * p->scale, rtol = p->rtol;
  double floor_d = abs_tol > 0 ? abs_tol : 1e-300;
  cmp_acc a = {.first_bad = -1};
  const double *ref = p->ref;
  if (p->dt == KA_DT_F32) { /* the common case, without a dtype switch per element */
    const float *out = p->out;
    for (int64_t i = p->lo; i < p->hi; i++) cmp_elem(&a, i, out[i], ref[i], abs_tol, rtol, floor_d);
  } else {
    for (int64_t i = p->lo; i < p->hi; i++)
      cmp_elem(&a, i, ka_load_double(p->dt, p->out, i), ref[i], abs_tol, rtol, floor_d);
  }
  ka_compare *res = &p->res;
  memset(res, 0, sizeof *res);
  res->mismatches = a.mismatches, res->nonfinite = a.nonfinite, res->first_bad = a.first_bad;
  res->max_abs_err = a.max_abs_err, res->max_rel_err = a.max_rel_err;
  res->first_out = a.first_out, res->first_ref = a.first_ref;
  return NULL;
}

/* Runs fn over parts[0..n): parts 1.. on their own threads, part 0 on this one (and any
 * whose thread could not start). */
static void cmp_parallel(void *(*fn)(void *), cmp_part *parts, int n) {
  pthread_t th[KA_FILL_MAX_THREADS];
  int started[KA_FILL_MAX_THREADS] = {0};
  for (int i = 1; i < n; i++) started[i] = pthread_create(&th[i], NULL, fn, &parts[i]) == 0;
  for (int i = 0; i < n; i++)
    if (!started[i]) fn(&parts[i]);
  for (int i = 1; i < n; i++)
    if (started[i]) pthread_join(th[i], NULL);
}

/* Elements per thread below which ka_compare_outputs stays on one thread. */
#define KA_CMP_MIN_PER_THREAD ((int64_t)1 << 21)

int ka_compare_outputs(ka_dtype dt, const void *out, const double *ref, int64_t elems, double atol,
                       double rtol, ka_compare *res) {
  return ka_compare_outputs_scaled(dt, out, ref, elems, atol, rtol, -1, res);
}

int ka_compare_outputs_scaled(ka_dtype dt, const void *out, const double *ref, int64_t elems,
                              double atol, double rtol, double ref_max, ka_compare *res) {
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int64_t want = elems / KA_CMP_MIN_PER_THREAD;
  int n = (int)(want < ncpu ? want : ncpu);
  if (n > KA_FILL_MAX_THREADS) n = KA_FILL_MAX_THREADS;
  if (n < 1) n = 1;
  cmp_part parts[KA_FILL_MAX_THREADS];
  for (int i = 0; i < n; i++)
    parts[i] = (cmp_part){.dt = dt,
                          .out = out,
                          .ref = ref,
                          .lo = elems * i / n,
                          .hi = elems * (i + 1) / n,
                          .atol = atol,
                          .rtol = rtol};
  double scale = ref_max >= 0 ? ref_max : 0;
  if (ref_max < 0) { /* not known: a pass of its own */
    cmp_parallel(cmp_scale, parts, n);
    for (int i = 0; i < n; i++)
      if (parts[i].scale > scale) scale = parts[i].scale;
  }
  if (scale == 0) scale = 1;
  for (int i = 0; i < n; i++) parts[i].scale = scale;
  cmp_parallel(cmp_range, parts, n);
  /* merge in index order: the first mismatch is the first part's that has one */
  memset(res, 0, sizeof *res);
  res->first_bad = -1;
  res->elements = elems;
  res->ref_scale = scale;
  for (int i = 0; i < n; i++) {
    const ka_compare *r = &parts[i].res;
    if (r->mismatches && res->first_bad < 0) {
      res->first_bad = r->first_bad;
      res->first_out = r->first_out;
      res->first_ref = r->first_ref;
    }
    res->mismatches += r->mismatches;
    res->nonfinite += r->nonfinite;
    if (r->max_abs_err > res->max_abs_err) res->max_abs_err = r->max_abs_err;
    if (r->max_rel_err > res->max_rel_err) res->max_rel_err = r->max_rel_err;
  }
  return res->mismatches == 0;
}
