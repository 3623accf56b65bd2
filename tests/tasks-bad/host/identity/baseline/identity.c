/* Baseline of the broken fixture host/identity: the output is a copy of the input */
#include <math.h>

void identity_forward(const float *x, float *y, long long n) {
  for (long long i = 0; i < n; i++) y[i] = x[i];
}
