/* GELU, exact form: y = 0.5 * x * (1 + erf(x / sqrt(2))), float32, on the CPU.
 * Entry point called by the evaluator: gelu_forward(x, y, n). */
#include <math.h>

void gelu_forward(const float *x, float *y, long long n) {
  for (long long i = 0; i < n; i++) {
    double v = x[i];
    y[i] = (float)(0.5 * v * (1.0 + erf(v * 0.70710678118654752440)));
  }
}
