/* Baseline of the broken fixture host/held_out_shown: the held-out case has the shape of a shown case */
#include <math.h>

void held_out_shown_forward(const float *x, float *y, long long n) {
  for (long long i = 0; i < n; i++) y[i] = x[i] * x[i];
}
