/* Honest: the baseline's GELU. Expected: OK, every timed call verified. */
#include <math.h>

void gelu_forward(const float *x, float *y, long long n) {
  for (long long i = 0; i < n; i++) {
    double v = x[i];
    y[i] = (float)(0.5 * v * (1.0 + erf(v * 0.70710678118654752440)));
  }
}
