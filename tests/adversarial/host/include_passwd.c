/* Fault: includes a file outside the workspace; the compile log must not show it. */
#include <math.h>
#include "/etc/passwd"

void gelu_forward(const float *x, float *y, long long n) {
  for (long long i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
}
