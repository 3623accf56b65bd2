/* Reference of the broken fixture host/no_tail: the baseline skips the tail of n modulo 4, which only held-out sizes have */
#include <math.h>
#include <stdint.h>

void no_tail_ref(void *const *tensors, const int64_t *params) {
  const float *x = tensors[0];
  double *y = tensors[1];
  int64_t n = params[0];
  for (int64_t i = 0; i < n; i++) y[i] = 3.0 * x[i];
}
