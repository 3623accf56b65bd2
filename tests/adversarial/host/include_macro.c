/* Fault: a computed include (the operand is a macro), spelled with a digraph and a
 * backslash-newline splice as well. */
#include <math.h>
#define SECRET "/etc/passwd"
#include SECRET
%:inc\
lude </etc/shadow>

void gelu_forward(const float *x, float *y, long long n) {
  for (long long i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
}
