/* Baseline of the broken fixture host/ignores_input: the output does not depend on input b */
#include <math.h>

void ignores_input_forward(const float *a, const float *b, float *y, long long n) {
  for (long long i = 0; i < n; i++) y[i] = 2.0f * a[i];
}
