/* Trusted reference for host/matmul_f32, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j. */
#include <math.h>
#include <stdint.h>

void matmul_f32_ref(void *const *tensors, const int64_t *params) {
  const float *a = tensors[0], *b = tensors[1];
  double *c = tensors[2];
  int64_t m = params[0], n = params[1], k = params[2];
#pragma omp parallel for
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) c[i * n + j] = 0;
    for (int64_t p = 0; p < k; p++) {
      double av = a[i * k + p];
      for (int64_t j = 0; j < n; j++) c[i * n + j] += av * b[p * n + j];
    }
  }
}
