// Transpose: y[c, r] = x[r, c]; x is rows x cols, y is cols x rows, both row-major.
// One thread per element on a 2-D grid: threads of a block row read consecutive
// elements of x (coalesced) and write elements of y that are rows apart.
// HIP kernel code. On AMD it is compiled with hiprtc; on NVIDIA the cuda backend
// compiles it with NVRTC through kernelarena's HIP-to-CUDA mapping header.
#include <hip/hip_runtime.h>

extern "C" __global__ void transpose_f32(const float* __restrict__ x, float* __restrict__ y,
                                         int rows, int cols) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  int r = blockIdx.y * blockDim.y + threadIdx.y;
  if (r < rows && c < cols) y[(long long)c * rows + r] = x[(long long)r * cols + c];
}
