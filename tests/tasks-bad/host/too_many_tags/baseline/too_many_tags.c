/* Baseline of the broken fixture host/too_many_tags: nine tags, one more than a task may have */
#include <math.h>

void too_many_tags_forward(const float *x, float *y, long long n) {
  for (long long i = 0; i < n; i++) y[i] = x[i];
}
