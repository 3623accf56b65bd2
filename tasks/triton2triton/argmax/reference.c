/* Trusted reference for triton2triton/argmax.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * x: float [rows, cols], idx: double [rows] holding the index (exact below 2^53).
 * The first (smallest) index among equal maxima wins, as torch.argmax and numpy.argmax. */
#include <stdint.h>

void argmax_ref(void *const *tensors, const int64_t *params) {
  const float *x = tensors[0];
  double *idx = tensors[1];
  int64_t rows = params[0], cols = params[1];
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    int64_t best = 0;
    for (int64_t c = 1; c < cols; c++)
      if (xr[c] > xr[best]) best = c;
    idx[r] = (double)best;
  }
}
