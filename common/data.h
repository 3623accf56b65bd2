/* Seeded input generation, output poisoning and comparison with the reference.
 * All functions are reentrant; buffers are caller-owned. */
#ifndef KA_DATA_H
#define KA_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "task.h"

/* xoshiro256** 1.0 (D. Blackman, S. Vigna, "Scrambled linear pseudorandom number
 * generators", ACM TOMS 2021), seeded through splitmix64 as its authors recommend. */
typedef struct ka_rng {
  uint64_t s[4];
} ka_rng;
void ka_rng_seed(ka_rng *r, uint64_t seed);
uint64_t ka_rng_next(ka_rng *r);
/* Uniform double in [0, 1) with 53 random bits. */
double ka_rng_uniform(ka_rng *r);
/* splitmix64 finaliser: mixes a, b into an independent stream seed. */
uint64_t ka_mix64(uint64_t a, uint64_t b);

/* The counter-based input generator, shared bit for bit by the host (here) and the
 * device (ka_trusted_fill, gpuexec/backends/trusted_kernels.cu). Element i under a 64-bit key:
 * x[0..4) = Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel Random Numbers: As Easy
 * as 1, 2, 3", SC 2011) of counter {c lo, c hi, 0x6b61, 0} under key {key lo, key hi},
 * c = i (normal: c = i / 2, both values of one Box-Muller pair from one counter);
 * u1 = ((x0 << 32 | x1) >> 11) 2^-53, u2 likewise from x2, x3; then
 *   normal (a mean, b std): a + b (sqrt(-2 ka_gen_log(1 - u1)) ka_gen_cos2pi(w)), w = u2
 *     for even i, |u2 - 1/4| for odd i (the sine; the subtraction is exact)
 *     (Box-Muller with our own log and cosine, so that both sides compute the same bits);
 *   uniform: a + (b - a) u1;  integers: ceil(a) + floor(u1 (floor(b) - ceil(a) + 1));
 *   KA_GEN_POISON: with h = lowbias32 (Chris Wellons, 2018) and
 *     r = h(lo(i) ^ lo(key) ^ h(hi(i) ^ hi(key))), and for 8-byte dtypes
 *     r |= h(r + 0x9e3779b9) << 32 (no Philox: poison needs a pattern per call, not
 *     secrecy; the candidate reads it), a quiet NaN with the low bits of r as payload
 *     (floats), those bits (integers);
 * stored as the dtype stores a double (f16 through f32). */
#define KA_GEN_POISON 3 /* the "distribution" of poison (ka_dist has 0..2) */
void ka_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
/* ln x for 0 < x <= 1, and cos(2 pi u) for 0 <= u < 1, as the generator computes them
 * (relative error below 1e-13; exactly reproducible). */
double ka_gen_log(double x);
double ka_gen_cos2pi(double u);
/* Element i's bits (in the low bytes) under key. */
uint64_t ka_gen_bits(uint64_t i, ka_dtype dt, int dist, double a, double b, uint64_t key);
/* The key of tensor tensor_index of case case_index under seed (ka_fill_input's). */
uint64_t ka_fill_key(uint64_t seed, int case_index, int tensor_index);

/* Fills buf (elems elements of spec->dtype) from spec's distribution with the generator
 * above under ka_fill_key(seed, case_index, tensor_index): deterministic for those
 * inputs whatever the number of threads, and element for element ka_gen_bits's bits
 * (normal values are drawn a pair at a time, sharing what the pair shares, 16 pairs a
 * stage in vector lanes: 4-5x faster than element by element).
 * Large tensors are drawn by up to one thread per online CPU (at most 32), joined before
 * return. Init bounds given as expressions over
 * params (spec->init_expr) are evaluated for case_index, an index into spec->task's cases
 * (ka_task_init_bounds; a loaded task was checked to evaluate in every case). Reentrant;
 * buf is caller-owned. */
void ka_fill_input(const ka_tensor_spec *spec, void *buf, int64_t elems, uint64_t seed,
                   int case_index, int tensor_index);

/* 1 while the vector normal draw has always agreed with ka_gen_bits; 0 once a chunk's
 * spot check (three elements of every chunk) found a difference, after which every normal
 * draw is element by element, with the definition's bits (and a line on stderr). Thread
 * safe. */
int ka_fill_vector_ok(void);

/* Fills buf with a poison pattern that depends on seed: quiet NaNs with random payloads
 * for floating dtypes, random bytes for integers. */
void ka_fill_poison(ka_dtype dt, void *buf, int64_t elems, uint64_t seed);

/* Element i of buf as a double. */
double ka_load_double(ka_dtype dt, const void *buf, int64_t i);

/* Conversions (round to nearest even). */
uint16_t ka_f32_to_bf16(float f);
float ka_bf16_to_f32(uint16_t h);

typedef struct ka_compare {
  int64_t elements, mismatches, nonfinite;
  double max_abs_err, max_rel_err, ref_scale;
  int64_t first_bad; /* index of the first mismatch, -1 if none */
  double first_out, first_ref;
} ka_compare;

/* Compares out (elems of dt) with ref (double). Element i passes iff both are the same
 * non-finite value, or both are finite and |out-ref| <= atol*scale + rtol*|ref|, where
 * scale = max(|ref|) over the tensor (1 if that is 0). The scale makes atol relative to
 * the tensor's magnitude, so a near-zero output cannot pass a large-valued reference and
 * tolerances mean the same at any magnitude. NaN or Inf where the reference is finite
 * fails. Returns 1 if every element passes. Large tensors are compared on several threads
 * (results as on one). Thread safe. */
int ka_compare_outputs(ka_dtype dt, const void *out, const double *ref, int64_t elems, double atol,
                       double rtol, ka_compare *res);

/* ka_compare_outputs with ref_max, the largest finite |ref| (>= 0), known already (the
 * reference cache keeps it): one pass over the data instead of two. ref_max < 0: as
 * ka_compare_outputs. Thread safe. */
int ka_compare_outputs_scaled(ka_dtype dt, const void *out, const double *ref, int64_t elems,
                              double atol, double rtol, double ref_max, ka_compare *res);

#endif
