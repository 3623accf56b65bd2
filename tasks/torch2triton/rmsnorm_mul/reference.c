/* Trusted reference for torch2triton/rmsnorm_mul, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * x, gate: float [rows, hidden], weight: float [hidden], y: double [rows, hidden];
 * y = x / sqrt(mean(x^2) + 1e-6) * weight * gate per row. */
#include <math.h>
#include <stdint.h>

void rmsnorm_mul_ref(void *const *tensors, const int64_t *params) {
  const float *x = tensors[0], *w = tensors[1], *g = tensors[2];
  double *y = tensors[3];
  int64_t rows = params[0], hidden = params[1];
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * hidden, *gr = g + r * hidden;
    double *yr = y + r * hidden;
    double ss = 0;
    for (int64_t c = 0; c < hidden; c++) ss += (double)xr[c] * xr[c];
    double rstd = 1.0 / sqrt(ss / (double)hidden + 1e-6);
    for (int64_t c = 0; c < hidden; c++) yr[c] = xr[c] * rstd * w[c] * gr[c];
  }
}
