/* Trusted reference for torch2triton/matmul_bias_relu, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * x [m, k], w [k, n], b [n] are bfloat16 bit patterns (the upper 16 bits of a float32);
 * y[i][j] = max(0, b[j] + sum_p x[i][p] * w[p][j]), accumulated in double (every product
 * is exact). w is widened to double once; blocks of RB rows of y are accumulated together
 * so each row of w is read once per block. */
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

void matmul_bias_relu_ref(void *const *tensors, const int64_t *params) {
  const uint16_t *x = tensors[0], *w = tensors[1], *b = tensors[2];
  double *y = tensors[3];
  int64_t m = params[0], n = params[1], k = params[2];
  double *wd = malloc(sizeof(double) * (size_t)(k * n));
  if (!wd) {
    for (int64_t i = 0; i < m * n; i++) y[i] = NAN; /* out of memory: fail loudly */
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < k * n; i++) wd[i] = bf16_to_double(w[i]);
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i0 = 0; i0 < m; i0 += RB) {
    int64_t i1 = i0 + RB < m ? i0 + RB : m;
    for (int64_t i = i0; i < i1; i++)
      for (int64_t j = 0; j < n; j++) y[i * n + j] = bf16_to_double(b[j]);
    for (int64_t p = 0; p < k; p++) {
      const double *wr = wd + p * n;
      for (int64_t i = i0; i < i1; i++) {
        double a = bf16_to_double(x[i * k + p]);
        double *yr = y + i * n;
        for (int64_t j = 0; j < n; j++) yr[j] += a * wr[j];
      }
    }
    for (int64_t i = i0 * n; i < i1 * n; i++) y[i] = y[i] > 0 ? y[i] : 0;
  }
  free(wd);
}
