/* Trusted reference for torch2cuda/linear_gelu, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * x: float [m, k], weight: float [n, k], bias: float [n], y: double [m, n];
 * y = gelu(x @ weight^T + bias), gelu exact (erf). */
#include <math.h>
#include <stdint.h>

void linear_gelu_ref(void *const *tensors, const int64_t *params) {
  const float *x = tensors[0], *w = tensors[1], *b = tensors[2];
  double *y = tensors[3];
  int64_t m = params[0], n = params[1], k = params[2];
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < m; i++) {
    const float *xr = x + i * k;
    for (int64_t j = 0; j < n; j++) {
      const float *wr = w + j * k;
      double s = b[j];
      for (int64_t p = 0; p < k; p++) s += (double)xr[p] * wr[p];
      y[i * n + j] = 0.5 * s * (1.0 + erf(s * 0.70710678118654752440));
    }
  }
}
