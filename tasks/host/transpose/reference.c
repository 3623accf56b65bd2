/* Trusted reference for host/transpose, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j. */
#include <math.h>
#include <stdint.h>

void transpose_ref(void *const *tensors, const int64_t *params) {
  const float *x = tensors[0];
  double *y = tensors[1];
  int64_t rows = params[0], cols = params[1];
#pragma omp parallel for
  for (int64_t c = 0; c < cols; c++)
    for (int64_t r = 0; r < rows; r++) y[c * rows + r] = x[r * cols + c];
}
