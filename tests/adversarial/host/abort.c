/* Fault: abort() in the entry point. */
#include <math.h>
#include <stdlib.h>

void gelu_forward(const float *x, float *y, long long n) {
  abort();
}
