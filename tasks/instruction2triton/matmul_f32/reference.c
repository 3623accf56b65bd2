/* Trusted reference for instruction2triton/matmul_f32, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * C[i][j] = sum_p A[i][p] * B[p][j], row-major. Every float product is exact in double.
 * Blocks of RB rows of C are accumulated together so that each row of B is read once
 * per block (the inner loop is a contiguous axpy the compiler vectorizes). */
#include <stdint.h>
#include <string.h>

#define RB 32

void matmul_f32_ref(void *const *tensors, const int64_t *params) {
  const float *A = tensors[0], *B = tensors[1];
  double *C = tensors[2];
  int64_t m = params[0], n = params[1], k = params[2];
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i0 = 0; i0 < m; i0 += RB) {
    int64_t i1 = i0 + RB < m ? i0 + RB : m;
    memset(C + i0 * n, 0, sizeof(double) * (size_t)((i1 - i0) * n));
    for (int64_t p = 0; p < k; p++) {
      const float *b = B + p * n;
      for (int64_t i = i0; i < i1; i++) {
        double a = A[i * k + p];
        double *c = C + i * n;
        for (int64_t j = 0; j < n; j++) c[j] += a * (double)b[j];
      }
    }
  }
}
