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

/* Fills buf (elems elements of spec->dtype) from spec's distribution. Element i comes
 * from the stream of chunk i / 2^20, derived from (seed, case_index, tensor_index,
 * chunk), so the values are deterministic for those inputs whatever the number of
 * threads. Large tensors are drawn by up to one thread per online CPU (at most 32),
 * joined before return. Init bounds given as expressions over params (spec->init_expr)
 * are evaluated for case_index, an index into spec->task's cases (ka_task_init_bounds;
 * a loaded task was checked to evaluate in every case). Reentrant; buf is caller-owned. */
void ka_fill_input(const ka_tensor_spec *spec, void *buf, int64_t elems, uint64_t seed,
                   int case_index, int tensor_index);

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

#endif
