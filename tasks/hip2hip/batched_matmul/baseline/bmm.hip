// C[b] = A[b] * B[b] for b in [0, batch); A[b] is m x k, B[b] is k x n, C[b] is m x n,
// all float32, row-major, packed one matrix after another.
// Shared-memory tiled: block (x, y, z) computes the 16x16 tile (y, x) of C[z], stepping
// through k in 16-wide slabs staged in shared memory; edges are zero-padded.
// HIP kernel code: hiprtc on AMD, NVRTC through kernelarena's HIP-to-CUDA header on NVIDIA.
#include <hip/hip_runtime.h>

#define TILE 16

extern "C" __global__ void bmm_tiled(const float* __restrict__ A, const float* __restrict__ B,
                                     float* __restrict__ C, int batch, int m, int n, int k) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int b = blockIdx.z;
  if (b >= batch) return;
  const float* a = A + (long long)b * m * k;
  const float* bb = B + (long long)b * k * n;
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE + ty;
  int col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < k; k0 += TILE) {
    int ka = k0 + tx, kb = k0 + ty;
    As[ty][tx] = (row < m && ka < k) ? a[(long long)row * k + ka] : 0.0f;
    Bs[ty][tx] = (kb < k && col < n) ? bb[(long long)kb * n + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < TILE; i++) acc += As[ty][i] * Bs[i][tx];
    __syncthreads();
  }
  if (row < m && col < n) C[(long long)b * m * n + (long long)row * n + col] = acc;
}
