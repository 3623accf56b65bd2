/* Trusted reference for triton2triton/matmul_bf16, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * A and B are bfloat16 bit patterns (the upper 16 bits of a float32). C[i][j] =
 * sum_p A[i][p] * B[p][j], row-major, accumulated in double (every product is exact).
 * B is widened to double once; blocks of RB rows of C are accumulated together so
 * each row of B is read once per block. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RB 32

static double bf16_to_double(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

void matmul_bf16_ref(void *const *tensors, const int64_t *params) {
  const uint16_t *A = tensors[0], *B = tensors[1];
  double *C = tensors[2];
  int64_t m = params[0], n = params[1], k = params[2];
  double *Bd = malloc(sizeof(double) * (size_t)(k * n));
  if (!Bd) {
    for (int64_t i = 0; i < m * n; i++) C[i] = NAN; /* out of memory: fail loudly */
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < k * n; i++) Bd[i] = bf16_to_double(B[i]);
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i0 = 0; i0 < m; i0 += RB) {
    int64_t i1 = i0 + RB < m ? i0 + RB : m;
    memset(C + i0 * n, 0, sizeof(double) * (size_t)((i1 - i0) * n));
    for (int64_t p = 0; p < k; p++) {
      const double *b = Bd + p * n;
      for (int64_t i = i0; i < i1; i++) {
        double a = bf16_to_double(A[i * k + p]);
        double *c = C + i * n;
        for (int64_t j = 0; j < n; j++) c[j] += a * b[j];
      }
    }
  }
  free(Bd);
}
