/* Trusted reference for triton2triton/rmsnorm, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * x: bf16 [rows, hidden], weight: bf16 [hidden] (raw 16-bit patterns),
 * y: double [rows, hidden]. eps = 1e-6 (Llama's rms_norm_eps). */
#include <math.h>
#include <stdint.h>
#include <string.h>

static double bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

void rmsnorm_ref(void *const *tensors, const int64_t *params) {
  const uint16_t *x = tensors[0], *w = tensors[1];
  double *y = tensors[2];
  int64_t rows = params[0], hidden = params[1];
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const uint16_t *xr = x + r * hidden;
    double *yr = y + r * hidden;
    double q = 0;
    for (int64_t c = 0; c < hidden; c++) q += bf16(xr[c]) * bf16(xr[c]);
    double rstd = 1.0 / sqrt(q / (double)hidden + 1e-6);
    for (int64_t c = 0; c < hidden; c++) yr[c] = bf16(xr[c]) * rstd * bf16(w[c]);
  }
}
