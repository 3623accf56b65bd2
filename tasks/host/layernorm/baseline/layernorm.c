/* LayerNorm: y = (x - mean) / sqrt(var + 1e-5) * gamma + beta per row (biased variance),
 * float32, row-major. Entry point: layernorm_forward(x, gamma, beta, y, rows, cols). */
#include <math.h>

void layernorm_forward(const float *x, const float *gamma, const float *beta, float *y,
                       long long rows, long long cols) {
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
