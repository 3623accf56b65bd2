/* Trusted reference for torch2cuda/layernorm, in double precision (two-pass variance).
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * x: float [rows, hidden], weight, bias: float [hidden], y: double [rows, hidden].
 * eps = 1e-5 and the biased variance, as torch.nn.LayerNorm's defaults. */
#include <math.h>
#include <stdint.h>

void layernorm_ref(void *const *tensors, const int64_t *params) {
  const float *x = tensors[0], *w = tensors[1], *b = tensors[2];
  double *y = tensors[3];
  int64_t rows = params[0], hidden = params[1];
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * hidden;
    double *yr = y + r * hidden;
    double mean = 0, var = 0;
    for (int64_t c = 0; c < hidden; c++) mean += xr[c];
    mean /= (double)hidden;
    for (int64_t c = 0; c < hidden; c++) var += (xr[c] - mean) * (xr[c] - mean);
    var /= (double)hidden;
    double rstd = 1.0 / sqrt(var + 1e-5);
    for (int64_t c = 0; c < hidden; c++) yr[c] = (xr[c] - mean) * rstd * w[c] + b[c];
  }
}
