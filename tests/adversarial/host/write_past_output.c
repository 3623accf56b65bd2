/* Fault (a new user's trial, 2026-12-04): computes y right, then writes 1024 elements
 * past its end. The write lands in another buffer of the module process or in unmapped
 * memory. Either way it is the submission's verdict: INCORRECT when it lands in an input
 * (the message names the input and says a write past an output can land there), or
 * RUNTIME_ERROR on a fault. It must never be OK or INFRA_ERROR. */
#include <math.h>

void gelu_forward(float *x, float *y, long long n) {
  for (long long i = 0; i < n; i++) {
    double v = x[i];
    y[i] = (float)(0.5 * v * (1.0 + erf(v * 0.70710678118654752440)));
  }
  for (long long i = n; i < n + 1024; i++) y[i] = 0;
}
