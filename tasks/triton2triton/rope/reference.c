/* Trusted reference for triton2triton/rope, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * Rotary position embedding, rotate-half convention (Su et al., "RoFormer", 2021,
 * eq. 34, with the GPT-NeoX / Hugging Face Llama pairing of i and i + hdim/2):
 *   theta = pos[t] * 10000^(-2i/hdim), i in [0, hdim/2)
 *   y[i] = x[i] cos(theta) - x[i+half] sin(theta); y[i+half] = x[i+half] cos + x[i] sin */
#include <math.h>
#include <stdint.h>

void rope_ref(void *const *tensors, const int64_t *params) {
  const float *x = tensors[0];
  const int32_t *pos = tensors[1];
  double *y = tensors[2];
  int64_t tokens = params[0], heads = params[1], hdim = params[2], half = hdim / 2;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tokens; t++) {
    for (int64_t i = 0; i < half; i++) {
      double theta = (double)pos[t] * pow(10000.0, -2.0 * (double)i / (double)hdim);
      double c = cos(theta), s = sin(theta);
      for (int64_t h = 0; h < heads; h++) {
        const float *xr = x + (t * heads + h) * hdim;
        double *yr = y + (t * heads + h) * hdim;
        double a = xr[i], b = xr[i + half];
        yr[i] = a * c - b * s;
        yr[i + half] = b * c + a * s;
      }
    }
  }
}
