/* SwiGLU gating: out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)), float32.
 * Entry point called by the evaluator: silu_mul_forward(gate, up, out, n). */
#include <math.h>

void silu_mul_forward(const float *gate, const float *up, float *out, long long n) {
  for (long long i = 0; i < n; i++) {
    float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
  }
}
