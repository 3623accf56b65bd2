/* Trusted reference for triton2triton/silu_mul, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * x: bf16 [rows, 2 * d] (raw 16-bit patterns), y: double [rows, d]. */
#include <math.h>
#include <stdint.h>
#include <string.h>

static double bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

void silu_mul_ref(void *const *tensors, const int64_t *params) {
  const uint16_t *x = tensors[0];
  double *y = tensors[1];
  int64_t rows = params[0], d = params[1];
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows * d; i++) {
    int64_t r = i / d, j = i % d;
    double a = bf16(x[r * 2 * d + j]), b = bf16(x[r * 2 * d + d + j]);
    y[i] = a / (1.0 + exp(-a)) * b;
  }
}
