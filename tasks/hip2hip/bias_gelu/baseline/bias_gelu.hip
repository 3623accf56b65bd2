// Fused bias + GELU: y[r, c] = gelu(x[r, c] + bias[c]), gelu(v) = 0.5 v (1 + erf(v / sqrt 2)).
// HIP kernel code. On AMD it is compiled with hiprtc; on NVIDIA the cuda backend
// compiles it with NVRTC through kernelarena's HIP-to-CUDA mapping header.
#include <hip/hip_runtime.h>

// Grid: x covers the columns of a row, y is the row.
extern "C" __global__ void bias_gelu_f32(const float* __restrict__ x,
                                         const float* __restrict__ bias, float* __restrict__ y,
                                         int rows, int cols) {
  int r = blockIdx.y;
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows || c >= cols) return;
  long long i = (long long)r * cols + c;
  float v = x[i] + bias[c];
  y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}
