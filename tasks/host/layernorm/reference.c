/* Trusted reference for host/layernorm, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j. */
#include <math.h>
#include <stdint.h>

void layernorm_ref(void *const *tensors, const int64_t *params) {
  const float *x = tensors[0], *gamma = tensors[1], *beta = tensors[2];
  double *y = tensors[3];
  int64_t rows = params[0], cols = params[1];
#pragma omp parallel for
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; c++) mean += xr[c];
    mean /= (double)cols;
    for (int64_t c = 0; c < cols; c++) var += (xr[c] - mean) * (xr[c] - mean);
    var /= (double)cols;
    double inv = 1.0 / sqrt(var + 1e-5);
    for (int64_t c = 0; c < cols; c++) y[r * cols + c] = (xr[c] - mean) * inv * gamma[c] + beta[c];
  }
}
