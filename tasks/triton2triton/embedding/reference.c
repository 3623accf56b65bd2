/* Trusted reference for triton2triton/embedding.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * out[t][d] = table[idx[t]][d]; an index outside [0, vocab) (never generated) yields NaN. */
#include <math.h>
#include <stdint.h>

void embedding_ref(void *const *tensors, const int64_t *params) {
  const float *table = tensors[0];
  const int32_t *idx = tensors[1];
  double *out = tensors[2];
  int64_t tokens = params[0], dim = params[1], vocab = params[2];
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tokens; t++) {
    int64_t row = idx[t];
    for (int64_t d = 0; d < dim; d++)
      out[t * dim + d] = row >= 0 && row < vocab ? (double)table[row * dim + d] : NAN;
  }
}
