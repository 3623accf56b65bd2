/* Trusted reference for triton2triton/transpose.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * x: float [rows, cols], y: double [cols, rows]. Tiles of 64 x 64 keep both sides in
 * cache. */
#include <stdint.h>

#define REF_TILE 64

void transpose_ref(void *const *tensors, const int64_t *params) {
  const float *x = tensors[0];
  double *y = tensors[1];
  int64_t rows = params[0], cols = params[1];
#pragma omp parallel for schedule(static) collapse(2)
  for (int64_t cb = 0; cb < cols; cb += REF_TILE)
    for (int64_t rb = 0; rb < rows; rb += REF_TILE)
      for (int64_t c = cb; c < cb + REF_TILE && c < cols; c++)
        for (int64_t r = rb; r < rb + REF_TILE && r < rows; r++) y[c * rows + r] = x[r * cols + c];
}
