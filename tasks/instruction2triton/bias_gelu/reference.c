/* Trusted reference for instruction2triton/bias_gelu, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * x: float [rows, cols], bias: float [cols], y: double [rows, cols].
 * The sum x + bias is taken in float32, as the task states, so that the reference sees
 * the same GELU argument as a float32 kernel. */
#include <math.h>
#include <stdint.h>

void bias_gelu_ref(void *const *tensors, const int64_t *params) {
  const float *x = tensors[0], *bias = tensors[1];
  double *y = tensors[2];
  int64_t rows = params[0], cols = params[1];
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows * cols; i++) {
    double v = (double)(x[i] + bias[i % cols]);
    y[i] = 0.5 * v * (1.0 + erf(v * 0.70710678118654752440));
  }
}
