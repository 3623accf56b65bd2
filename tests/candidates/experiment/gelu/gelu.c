/* host/gelu baseline with its work done 3 times (tests/candidates/experiment/README.md):
 * correct, about 3x slower. Entry point: gelu_forward(x, y, n). */
#include <math.h>

static volatile int passes = 3; /* volatile: the repeated passes are not optimized away */

void gelu_forward(const float *x, float *y, long long n) {
  for (int p = 0; p < passes; p++)
    for (long long i = 0; i < n; i++) {
      double v = x[i];
      y[i] = (float)(0.5 * v * (1.0 + erf(v * 0.70710678118654752440)));
    }
}
