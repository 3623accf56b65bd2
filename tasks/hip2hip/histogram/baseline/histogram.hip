// Histogram: counts[b] = number of i with bin(x[i]) == b, bin(v) = (v * bins) >> 16, for
// keys v in [0, 65536) (equal-width bins over [0, 65536), as numpy.histogram with
// range (0, 65536)). Two kernels:
//   hist_zero:  counts[:] = 0 (the output arrives with arbitrary contents)
//   hist_block: each block counts a grid-strided share of x into a private histogram in
//               dynamic shared memory (bins ints), then adds it to counts with atomics.
// HIP kernel code. On AMD it is compiled with hiprtc; on NVIDIA the cuda backend
// compiles it with NVRTC through kernelarena's HIP-to-CUDA mapping header.
#include <hip/hip_runtime.h>

extern "C" __global__ void hist_zero(int* __restrict__ counts, int bins) {
  int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b < bins) counts[b] = 0;
}

extern "C" __global__ void hist_block(const int* __restrict__ x, int* __restrict__ counts,
                                      long long n, int bins) {
  extern __shared__ int local[];  // bins ints, sized by launch.yaml
  for (int b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    int b = (int)(((long long)x[i] * bins) >> 16);
    atomicAdd(&local[b], 1);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < bins; b += blockDim.x)
    if (local[b]) atomicAdd(&counts[b], local[b]);
}
