/* host/silu_mul baseline with its work done 3 times (tests/candidates/experiment/README.md):
 * correct, about 3x slower. Entry point: silu_mul_forward(gate, up, out, n). */
#include <math.h>

static volatile int passes = 3; /* volatile: the repeated passes are not optimized away */

void silu_mul_forward(const float *gate, const float *up, float *out, long long n) {
  for (int p = 0; p < passes; p++)
    for (long long i = 0; i < n; i++) {
      float g = gate[i];
      out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}
