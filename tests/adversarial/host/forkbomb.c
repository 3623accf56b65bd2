/* Fault: a fork bomb. fork() is declared by hand: the include allowlist is no defence
 * here, the seccomp filter is. The first fork stops the evaluation. */
#include <math.h>

int fork(void);

void gelu_forward(const float *x, float *y, long long n) {
  for (;;) fork();
}
