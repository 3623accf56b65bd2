// C[m,n] = A[m,k] * B[k,n], float32, all row-major.
// Shared-memory tiled: each 16x16 block computes a 16x16 tile of C, stepping through k
// in 16-wide slabs of A and B staged in shared memory; edges are zero-padded.
// HIP kernel code: hiprtc on AMD, NVRTC through kernelarena's HIP-to-CUDA header on NVIDIA.
#include <hip/hip_runtime.h>

#define TILE 16

extern "C" __global__ void matmul_tiled(const float* __restrict__ A, const float* __restrict__ B,
                                        float* __restrict__ C, int m, int n, int k) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE + ty;
  int col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < k; k0 += TILE) {
    int ka = k0 + tx, kb = k0 + ty;
    As[ty][tx] = (row < m && ka < k) ? A[(long long)row * k + ka] : 0.0f;
    Bs[ty][tx] = (kb < k && col < n) ? B[(long long)kb * n + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < TILE; i++) acc += As[ty][i] * Bs[i][tx];
    __syncthreads();
  }
  if (row < m && col < n) C[(long long)row * n + col] = acc;
}
