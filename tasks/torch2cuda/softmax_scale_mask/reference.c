/* Trusted reference for torch2cuda/softmax_scale_mask, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * x, mask: float [rows, cols], y: double [rows, cols]; y = softmax(x * 0.125 + mask)
 * over each row. */
#include <math.h>
#include <stdint.h>

void softmax_scale_mask_ref(void *const *tensors, const int64_t *params) {
  const float *x = tensors[0], *mask = tensors[1];
  double *y = tensors[2];
  int64_t rows = params[0], cols = params[1];
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols, *mr = mask + r * cols;
    double *yr = y + r * cols;
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < cols; c++) {
      yr[c] = (double)xr[c] * 0.125 + mr[c];
      if (yr[c] > m) m = yr[c];
    }
    for (int64_t c = 0; c < cols; c++) {
      yr[c] = exp(yr[c] - m);
      s += yr[c];
    }
    for (int64_t c = 0; c < cols; c++) yr[c] /= s;
  }
}
