/* Trusted reference for torch2cuda/gelu, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j. */
#include <math.h>
#include <stdint.h>

void gelu_ref(void *const *tensors, const int64_t *params) {
  const float *x = tensors[0];
  double *y = tensors[1];
  int64_t n = params[0];
  for (int64_t i = 0; i < n; i++) {
    double v = x[i];
    y[i] = 0.5 * v * (1.0 + erf(v * 0.70710678118654752440));
  }
}
