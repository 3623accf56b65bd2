/* Reference of the broken fixture host/held_out_shown: the held-out case has the shape of a shown case */
#include <math.h>
#include <stdint.h>

void held_out_shown_ref(void *const *tensors, const int64_t *params) {
  const float *x = tensors[0];
  double *y = tensors[1];
  int64_t n = params[0];
  for (int64_t i = 0; i < n; i++) y[i] = (double)x[i] * x[i];
}
