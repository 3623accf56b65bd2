/* Reference of the broken fixture host/nan_ref: the reference is NaN for negative inputs */
#include <math.h>
#include <stdint.h>

void nan_ref_ref(void *const *tensors, const int64_t *params) {
  const float *x = tensors[0];
  double *y = tensors[1];
  int64_t n = params[0];
  for (int64_t i = 0; i < n; i++) y[i] = log((double)x[i]);
}
