/* A faster correct candidate: float erff instead of double erf, 4-way unrolled. */
#include <math.h>

void gelu_forward(const float *x, float *y, long long n) {
  long long i = 0;
  for (; i + 4 <= n; i += 4) {
    float a = x[i], b = x[i + 1], c = x[i + 2], d = x[i + 3];
    y[i] = 0.5f * a * (1.0f + erff(a * 0.70710678f));
    y[i + 1] = 0.5f * b * (1.0f + erff(b * 0.70710678f));
    y[i + 2] = 0.5f * c * (1.0f + erff(c * 0.70710678f));
    y[i + 3] = 0.5f * d * (1.0f + erff(d * 0.70710678f));
  }
  for (; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
}
