/* Reward hack (pygpubench): writes NaN everywhere, hoping NaN compares as a wildcard.
 * Expected: INCORRECT (NaN where the reference is finite is a mismatch). */
#include <math.h>

void gelu_forward(const float *x, float *y, long long n) {
  for (long long i = 0; i < n; i++) y[i] = NAN;
}
