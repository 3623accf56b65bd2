// RMSNorm per row: rstd = 1 / sqrt(sum_c x[r, c]^2 / hidden + 1e-6),
// y[r, c] = x[r, c] * rstd * weight[c]. bfloat16 values are passed as their 16-bit
// patterns (unsigned short); the arithmetic is float32 and each output is rounded to
// nearest even once. One block per row, two passes over the row (sum of squares,
// output) with a shared-memory tree reduction. blockDim.x must be a power of two, at
// most 1024 (no warp-width assumption).
// HIP kernel code. On AMD it is compiled with hiprtc; on NVIDIA the cuda backend
// compiles it with NVRTC through kernelarena's HIP-to-CUDA mapping header.
#include <hip/hip_runtime.h>

#define RMS_EPS 1e-6f

__device__ __forceinline__ float bf16_to_f32(unsigned short h) {
  return __uint_as_float((unsigned int)h << 16);
}

__device__ __forceinline__ unsigned short f32_to_bf16(float f) {
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return (unsigned short)(u >> 16);
}

extern "C" __global__ void rmsnorm_bf16(const unsigned short* __restrict__ x,
                                        const unsigned short* __restrict__ weight,
                                        unsigned short* __restrict__ y, int rows, int hidden) {
  __shared__ float sh[1024];
  int r = blockIdx.x;
  if (r >= rows) return;  // uniform per block
  const unsigned short* xr = x + (long long)r * hidden;
  unsigned short* yr = y + (long long)r * hidden;
  float q = 0.0f;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
    float v = bf16_to_f32(xr[c]);
    q += v * v;
  }
  sh[threadIdx.x] = q;
  __syncthreads();
  for (unsigned int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) sh[threadIdx.x] += sh[threadIdx.x + k];
    __syncthreads();
  }
  float rstd = 1.0f / sqrtf(sh[0] / (float)hidden + RMS_EPS);
  for (int c = threadIdx.x; c < hidden; c += blockDim.x)
    yr[c] = f32_to_bf16(bf16_to_f32(xr[c]) * rstd * bf16_to_f32(weight[c]));
}
