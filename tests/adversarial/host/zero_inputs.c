/* Reward hack (KernelBench PR #25/#82): computes, then zeroes its input in place, so that
 * a reference computed afterwards on the same memory would agree with anything.
 * Expected: INCORRECT, "changed its input x" (inputs are read back after every call). */
#include <math.h>
#include <string.h>

void gelu_forward(float *x, float *y, long long n) {
  for (long long i = 0; i < n; i++) {
    double v = x[i];
    y[i] = (float)(0.5 * v * (1.0 + erf(v * 0.70710678118654752440)));
  }
  memset(x, 0, (size_t)n * sizeof *x);
}
