// SwiGLU (silu_and_mul): y[r, j] = silu(x[r, j]) * x[r, d + j], silu(a) = a / (1 + e^-a).
// bfloat16 values are passed as their 16-bit patterns (unsigned short); the arithmetic is
// float32 and the result is rounded to nearest even once.
// HIP kernel code. On AMD it is compiled with hiprtc; on NVIDIA the cuda backend
// compiles it with NVRTC through kernelarena's HIP-to-CUDA mapping header.
#include <hip/hip_runtime.h>

__device__ __forceinline__ float bf16_to_f32(unsigned short h) {
  return __uint_as_float((unsigned int)h << 16);
}

__device__ __forceinline__ unsigned short f32_to_bf16(float f) {
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return (unsigned short)(u >> 16);
}

// Grid: x covers the d columns of a row, y is the row.
extern "C" __global__ void silu_mul_bf16(const unsigned short* __restrict__ x,
                                         unsigned short* __restrict__ y, int rows, int d) {
  int r = blockIdx.y;
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows || j >= d) return;
  const unsigned short* xr = x + (long long)r * 2 * d;
  float a = bf16_to_f32(xr[j]);
  float b = bf16_to_f32(xr[d + j]);
  float s = a / (1.0f + expf(-a));
  y[(long long)r * d + j] = f32_to_bf16(s * b);
}
