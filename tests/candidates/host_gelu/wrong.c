/* Wrong: tanh approximation with a wrong constant; compiles and runs, fails the check. */
#include <math.h>

void gelu_forward(const float *x, float *y, long long n) {
  for (long long i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + tanhf(0.9f * x[i]));
}
