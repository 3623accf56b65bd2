/* Trusted reference for instruction2triton/scatter_add, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * out = table; out[idx[i]][d] += src[i][d] for i in [0, n) in order, in double. An index
 * outside [0, vocab) (never generated) is skipped. Parallel over columns d, so every
 * thread owns whole columns of out and the sums are race-free and deterministic. */
#include <stdint.h>

void scatter_add_ref(void *const *tensors, const int64_t *params) {
  const float *table = tensors[0], *src = tensors[2];
  const int32_t *idx = tensors[1];
  double *out = tensors[3];
  int64_t n = params[0], dim = params[1], vocab = params[2];
  for (int64_t i = 0; i < vocab * dim; i++) out[i] = table[i];
#pragma omp parallel for schedule(static)
  for (int64_t d0 = 0; d0 < dim; d0 += 8) {
    int64_t d1 = d0 + 8 < dim ? d0 + 8 : dim;
    for (int64_t i = 0; i < n; i++) {
      int64_t row = idx[i];
      if (row < 0 || row >= vocab) continue;
      for (int64_t d = d0; d < d1; d++) out[row * dim + d] += (double)src[i * dim + d];
    }
  }
}
