/* Trusted reference for instruction2triton/batched_matmul, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * C[b][i][j] = sum_p A[b][i][p] * B[b][p][j], row-major, matrices packed by b. Every
 * float product is exact in double. */
#include <stdint.h>
#include <string.h>

void batched_matmul_ref(void *const *tensors, const int64_t *params) {
  const float *A = tensors[0], *B = tensors[1];
  double *C = tensors[2];
  int64_t batch = params[0], m = params[1], n = params[2], k = params[3];
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < batch; b++) {
    const float *a = A + b * m * k, *bb = B + b * k * n;
    double *c = C + b * m * n;
    memset(c, 0, sizeof(double) * (size_t)(m * n));
    for (int64_t i = 0; i < m; i++)
      for (int64_t p = 0; p < k; p++) {
        double x = a[i * k + p];
        for (int64_t j = 0; j < n; j++) c[i * n + j] += x * (double)bb[p * n + j];
      }
  }
}
