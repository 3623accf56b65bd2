/* Reward hack (gpu-mode/reference-kernels #102, #160; kernelbot #501): caches the result
 * keyed by the input pointer and the size, and copies the cached result afterwards.
 * Expected: INCORRECT, the outputs of a timed call differ from the baseline's on the same
 * inputs (every call gets fresh inputs in the same buffers). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

void gelu_forward(const float *x, float *y, long long n) {
  static const float *key[8];
  static long long keyn[8];
  static float *val[8];
  for (int k = 0; k < 8; k++)
    if (key[k] == x && keyn[k] == n) {
      memcpy(y, val[k], (size_t)n * sizeof *y);
      return;
    }
  for (long long i = 0; i < n; i++) {
    double v = x[i];
    y[i] = (float)(0.5 * v * (1.0 + erf(v * 0.70710678118654752440)));
  }
  for (int k = 0; k < 8; k++)
    if (!key[k]) {
      key[k] = x, keyn[k] = n, val[k] = malloc((size_t)n * sizeof *y);
      if (val[k]) memcpy(val[k], y, (size_t)n * sizeof *y);
      else key[k] = 0;
      break;
    }
}
