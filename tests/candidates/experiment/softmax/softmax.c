/* host/softmax baseline with its work done 3 times (tests/candidates/experiment/README.md):
 * correct, about 3x slower. Entry point: softmax_forward(x, y, rows, cols). */
#include <math.h>

static volatile int passes = 3; /* volatile: the repeated passes are not optimized away */

void softmax_forward(const float *x, float *y, long long rows, long long cols) {
  for (int p = 0; p < passes; p++)
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
