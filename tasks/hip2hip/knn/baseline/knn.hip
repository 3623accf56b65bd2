// k-nearest neighbours, brute force: for query i, dist[i][0..k) are the k smallest of
// sum over d of (queries[i][d] - points[j][d])^2 over j in [0, npts), ascending.
// queries is nq x dim, points is npts x dim, dist is nq x k, all float32 row-major;
// dim <= 16, k <= 32. One thread per query keeps a sorted list of its best k; the block
// stages TILE points at a time in shared memory, all threads scanning the same tile.
// HIP kernel code: hiprtc on AMD, NVRTC through kernelarena's HIP-to-CUDA header on NVIDIA.
#include <hip/hip_runtime.h>

#define BLOCK 256
#define TILE 256
#define DMAX 16
#define KMAX 32

extern "C" __global__ void __launch_bounds__(BLOCK)
    knn_bruteforce(const float* __restrict__ queries, const float* __restrict__ points,
                   float* __restrict__ dist, int nq, int npts, int dim, int k) {
  __shared__ float tile[TILE * DMAX];
  int i = blockIdx.x * BLOCK + threadIdx.x;
  bool active = i < nq;
  float q[DMAX];
  for (int d = 0; d < DMAX; d++) q[d] = (active && d < dim) ? queries[(long long)i * dim + d] : 0.0f;
  float best[KMAX];
  for (int p = 0; p < KMAX; p++) best[p] = 3.402823466e38f;
  for (int j0 = 0; j0 < npts; j0 += TILE) {
    int cnt = min(TILE, npts - j0);
    for (int e = threadIdx.x; e < cnt * dim; e += BLOCK) tile[e] = points[(long long)j0 * dim + e];
    __syncthreads();
    if (active) {
      for (int j = 0; j < cnt; j++) {
        float s = 0.0f;
        for (int d = 0; d < dim; d++) {
          float t = q[d] - tile[j * dim + d];
          s += t * t;
        }
        if (s < best[k - 1]) {  // insertion into the sorted list
          int p = k - 1;
          while (p > 0 && best[p - 1] > s) {
            best[p] = best[p - 1];
            p--;
          }
          best[p] = s;
        }
      }
    }
    __syncthreads();
  }
  if (active)
    for (int p = 0; p < k; p++) dist[(long long)i * k + p] = best[p];
}
