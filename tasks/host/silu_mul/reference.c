/* Trusted reference for host/silu_mul, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j. */
#include <math.h>
#include <stdint.h>

void silu_mul_ref(void *const *tensors, const int64_t *params) {
  const float *gate = tensors[0], *up = tensors[1];
  double *out = tensors[2];
  int64_t n = params[0];
#pragma omp parallel for
  for (int64_t i = 0; i < n; i++) {
    double g = gate[i];
    out[i] = g / (1.0 + exp(-g)) * (double)up[i];
  }
}
