/* host/layernorm baseline with its work done 3 times (tests/candidates/experiment/README.md):
 * correct, about 3x slower. Entry point: layernorm_forward(x, gamma, beta, y, rows, cols). */
#include <math.h>

static volatile int passes = 3; /* volatile: the repeated passes are not optimized away */

void layernorm_forward(const float *x, const float *gamma, const float *beta, float *y,
                       long long rows, long long cols) {
  for (int p = 0; p < passes; p++)
    for (long long r = 0; r < rows; r++) {
      const float *xr = x + r * cols;
      float mean = 0.0f, var = 0.0f;
      for (long long c = 0; c < cols; c++) mean += xr[c];
      mean /= (float)cols;
      for (long long c = 0; c < cols; c++) var += (xr[c] - mean) * (xr[c] - mean);
      var /= (float)cols;
      float inv = 1.0f / sqrtf(var + 1e-5f);
      for (long long c = 0; c < cols; c++)
        y[r * cols + c] = (xr[c] - mean) * inv * gamma[c] + beta[c];
    }
}
