/* Row-wise softmax of a row-major float32 matrix, max-subtracted for stability:
 * y[r][c] = exp(x[r][c] - m_r) / sum_j exp(x[r][j] - m_r), m_r = max_j x[r][j].
 * Entry point called by the evaluator: softmax_forward(x, y, rows, cols). */
#include <math.h>

void softmax_forward(const float *x, float *y, long long rows, long long cols) {
  for (long long r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    float m = xr[0];
    for (long long c = 1; c < cols; c++) m = xr[c] > m ? xr[c] : m;
    float s = 0.0f;
    for (long long c = 0; c < cols; c++) {
      yr[c] = expf(xr[c] - m);
      s += yr[c];
    }
    float inv = 1.0f / s;
    for (long long c = 0; c < cols; c++) yr[c] *= inv;
  }
}
