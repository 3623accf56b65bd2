/* Trusted reference for torch2triton/softmax, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * x: float [rows, cols], y: double [rows, cols]. */
#include <math.h>
#include <stdint.h>

void softmax_ref(void *const *tensors, const int64_t *params) {
  const float *x = tensors[0];
  double *y = tensors[1];
  int64_t rows = params[0], cols = params[1];
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    double *yr = y + r * cols;
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < cols; c++)
      if (xr[c] > m) m = xr[c];
    for (int64_t c = 0; c < cols; c++) {
      yr[c] = exp((double)xr[c] - m);
      s += yr[c];
    }
    for (int64_t c = 0; c < cols; c++) yr[c] /= s;
  }
}
