// GELU, exact form: y = 0.5 * x * (1 + erf(x / sqrt(2))).
// HIP kernel code. On AMD it is compiled with hiprtc; on NVIDIA the cuda backend
// compiles it with NVRTC through kernelarena's HIP-to-CUDA mapping header.
#include <hip/hip_runtime.h>

extern "C" __global__ void gelu_f32(const float* __restrict__ x, float* __restrict__ y,
                                    long long n) {
  long long i = (long long)hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
  if (i < n) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  }
}
