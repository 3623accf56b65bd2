/* A compile that never ends (issue 16, class 9, host part): the file includes itself
 * twice at each of 40 levels (__INCLUDE_LEVEL__), 2^40 inclusions, with memory that stays
 * at the nesting depth. It ended as the evaluation's TIMEOUT (the C compiler's own limit
 * was the evaluation's). Expected: COMPILE_ERROR, "did not finish within its deadline"
 * (the compiler has a deadline of its own, inside the evaluation's). */
#if __INCLUDE_LEVEL__ < 40
#include "gelu.c"
#include "gelu.c"
#endif
#if __INCLUDE_LEVEL__ == 0
#include <math.h>

void gelu_forward(const float *x, float *y, long long n) {
  for (long long i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
}
#endif
