// Per-token symmetric int8 quantization. For each row r of x (tokens x hidden, float32):
//   amax = max_j |x[r][j]|,  scale[r] = amax / 127
//   q[r][j] = round_half_to_even(x[r][j] / scale[r]) clamped to [-127, 127]
// (scale 0 and q 0 for an all-zero row). One block of 256 threads per row: a
// shared-memory tree reduction (any wave size) finds amax, then every thread quantizes
// its strided elements.
// HIP kernel code: hiprtc on AMD, NVRTC through kernelarena's HIP-to-CUDA header on NVIDIA.
#include <hip/hip_runtime.h>

#define BLOCK 256

extern "C" __global__ void __launch_bounds__(BLOCK)
    quant_rows(const float* __restrict__ x, signed char* __restrict__ q,
               float* __restrict__ scale, int tokens, int hidden) {
  __shared__ float red[BLOCK];
  int r = blockIdx.x, tid = threadIdx.x;
  if (r >= tokens) return;
  const float* xr = x + (long long)r * hidden;
  signed char* qr = q + (long long)r * hidden;
  float m = 0.0f;
  for (int j = tid; j < hidden; j += BLOCK) m = fmaxf(m, fabsf(xr[j]));
  red[tid] = m;
  __syncthreads();
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (tid < s) red[tid] = fmaxf(red[tid], red[tid + s]);
    __syncthreads();
  }
  float amax = red[0];
  float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  if (tid == 0) scale[r] = amax / 127.0f;
  for (int j = tid; j < hidden; j += BLOCK) {
    float v = rintf(xr[j] * inv);  // round to nearest, ties to even
    v = fminf(fmaxf(v, -127.0f), 127.0f);
    qr[j] = (signed char)(int)v;
  }
}
