// Inclusive prefix sum y[i] = x[0] + ... + x[i] over int32 with 32-bit wraparound (the
// sums are taken as unsigned int, whose overflow is defined).
// Three kernels, scan-then-propagate over tiles of SCAN_TILE elements:
//   scan_tile_sums:    block b writes the sum of tile b to tile_sums[b]
//   scan_tile_offsets: one block turns tile_sums into an exclusive scan, in place
//   scan_tiles:        block b scans tile b, starting from tile_sums[b]
// The block scans are Hillis-Steele scans in shared memory (any blockDim.x up to 1024,
// no warp-width assumption). launch.yaml must size grids and tile_sums for SCAN_TILE.
// HIP kernel code. On AMD it is compiled with hiprtc; on NVIDIA the cuda backend
// compiles it with NVRTC through kernelarena's HIP-to-CUDA mapping header.
#include <hip/hip_runtime.h>

#define SCAN_TILE 8192

// Inclusive scan of v over the block; on return sh[0 .. blockDim.x) holds the scan of
// the block (callers read the total from sh[blockDim.x - 1], then __syncthreads()
// before sh is written again).
__device__ unsigned int block_scan(unsigned int v, unsigned int* sh) {
  unsigned int t = threadIdx.x;
  sh[t] = v;
  __syncthreads();
  for (unsigned int off = 1; off < blockDim.x; off <<= 1) {
    unsigned int add = t >= off ? sh[t - off] : 0u;
    __syncthreads();
    sh[t] += add;
    __syncthreads();
  }
  return sh[t];
}

extern "C" __global__ void scan_tile_sums(const int* __restrict__ x,
                                          unsigned int* __restrict__ tile_sums, long long n) {
  __shared__ unsigned int sh[1024];
  long long begin = (long long)blockIdx.x * SCAN_TILE;
  long long end = begin + SCAN_TILE < n ? begin + SCAN_TILE : n;
  unsigned int s = 0;
  for (long long i = begin + threadIdx.x; i < end; i += blockDim.x) s += (unsigned int)x[i];
  sh[threadIdx.x] = s;
  __syncthreads();
  // sum of the block: tree over a power-of-two prefix, the rest folded in first
  unsigned int p = 1;
  while (p * 2 <= blockDim.x) p *= 2;
  if (threadIdx.x >= p) sh[threadIdx.x - p] += sh[threadIdx.x];
  __syncthreads();
  for (unsigned int k = p / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) sh[threadIdx.x] += sh[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) tile_sums[blockIdx.x] = sh[0];
}

extern "C" __global__ void scan_tile_offsets(unsigned int* __restrict__ tile_sums, long long n) {
  __shared__ unsigned int sh[1024];
  long long tiles = (n + SCAN_TILE - 1) / SCAN_TILE;
  unsigned int carry = 0;
  for (long long base = 0; base < tiles; base += blockDim.x) {  // uniform loop
    long long i = base + threadIdx.x;
    unsigned int v = i < tiles ? tile_sums[i] : 0u;
    unsigned int incl = block_scan(v, sh);
    if (i < tiles) tile_sums[i] = carry + incl - v;  // exclusive
    carry += sh[blockDim.x - 1];
    __syncthreads();
  }
}

extern "C" __global__ void scan_tiles(const int* __restrict__ x,
                                      const unsigned int* __restrict__ tile_offsets,
                                      int* __restrict__ y, long long n) {
  __shared__ unsigned int sh[1024];
  long long begin = (long long)blockIdx.x * SCAN_TILE;
  long long end = begin + SCAN_TILE < n ? begin + SCAN_TILE : n;
  unsigned int carry = tile_offsets[blockIdx.x];
  for (long long base = begin; base < end; base += blockDim.x) {  // uniform loop
    long long i = base + threadIdx.x;
    unsigned int v = i < end ? (unsigned int)x[i] : 0u;
    unsigned int incl = block_scan(v, sh);
    if (i < end) y[i] = (int)(carry + incl);
    carry += sh[blockDim.x - 1];
    __syncthreads();
  }
}
