/* Trusted reference for torch2triton/residual_layernorm, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * x, residual: float [rows, hidden], weight, bias: float [hidden], y: double [rows, hidden].
 * h = x + residual in double (as the float64 PyTorch reference adds), then LayerNorm
 * with eps = 1e-5 and the biased variance (two-pass), in double. */
#include <math.h>
#include <stdint.h>

void residual_layernorm_ref(void *const *tensors, const int64_t *params) {
  const float *x = tensors[0], *res = tensors[1], *w = tensors[2], *b = tensors[3];
  double *y = tensors[4];
  int64_t rows = params[0], hidden = params[1];
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * hidden, *rr = res + r * hidden;
    double *yr = y + r * hidden;
    double mean = 0, var = 0;
    for (int64_t c = 0; c < hidden; c++) {
      yr[c] = (double)xr[c] + rr[c];
      mean += yr[c];
    }
    mean /= (double)hidden;
    for (int64_t c = 0; c < hidden; c++) var += (yr[c] - mean) * (yr[c] - mean);
    var /= (double)hidden;
    double rstd = 1.0 / sqrt(var + 1e-5);
    for (int64_t c = 0; c < hidden; c++) yr[c] = (yr[c] - mean) * rstd * w[c] + b[c];
  }
}
