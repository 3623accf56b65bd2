/* Trusted reference for host/rmsnorm, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j. */
#include <math.h>
#include <stdint.h>

void rmsnorm_ref(void *const *tensors, const int64_t *params) {
  const float *x = tensors[0], *w = tensors[1];
  double *y = tensors[2];
  int64_t rows = params[0], cols = params[1];
#pragma omp parallel for
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    double ss = 0;
    for (int64_t c = 0; c < cols; c++) ss += (double)xr[c] * xr[c];
    double inv = 1.0 / sqrt(ss / (double)cols + 1e-6);
    for (int64_t c = 0; c < cols; c++) y[r * cols + c] = xr[c] * inv * w[c];
  }
}
