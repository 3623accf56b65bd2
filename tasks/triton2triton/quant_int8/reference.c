/* Trusted reference for triton2triton/quant_int8, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * Per-row symmetric ("absmax") int8 quantization, as in LLM.int8() (Dettmers et al.,
 * 2022, eq. 1, vector-wise): scale = max|x| / 127, q = round(x / scale) with ties to
 * even (nearbyint in the default rounding mode), clamped to [-127, 127]; an all-zero
 * row gives scale 0 and q 0. */
#include <math.h>
#include <stdint.h>

void quant_int8_ref(void *const *tensors, const int64_t *params) {
  const float *x = tensors[0];
  double *q = tensors[1], *scale = tensors[2];
  int64_t tokens = params[0], hidden = params[1];
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < tokens; r++) {
    const float *xr = x + r * hidden;
    double amax = 0;
    for (int64_t j = 0; j < hidden; j++) amax = fmax(amax, fabs((double)xr[j]));
    scale[r] = amax / 127.0;
    for (int64_t j = 0; j < hidden; j++) {
      double v = amax > 0 ? nearbyint((double)xr[j] * 127.0 / amax) : 0.0;
      q[r * hidden + j] = fmin(fmax(v, -127.0), 127.0);
    }
  }
}
