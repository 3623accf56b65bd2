// Per-row top-k: for each row r of x (rows x n, float32, row-major), values[r][0..k) are
// the k largest elements in descending order and indices[r][0..k) their columns. Equal
// values are ordered by smaller column first. k <= 32.
// One block of 128 threads per row. Each thread keeps a sorted list of the best k of the
// columns it visits (tid, tid + 128, ...), then k rounds of a block-wide arg-max over the
// threads' list heads pick the answer in order (a pointer per thread advances when its
// head is taken). Shared-memory tree reductions only, so any wave size works. The lists
// take 2 * KMAX * BLOCK * 4 = 32 KiB of static shared memory; launch with BLOCK threads.
// HIP kernel code: hiprtc on AMD, NVRTC through kernelarena's HIP-to-CUDA header on NVIDIA.
#include <hip/hip_runtime.h>

#define KMAX 32
#define BLOCK 128

// (v, i) ranks before (w, j): larger value first, then smaller index.
__device__ __forceinline__ bool ranks_before(float v, int i, float w, int j) {
  return v > w || (v == w && i < j);
}

extern "C" __global__ void __launch_bounds__(BLOCK)
    topk_rows(const float* __restrict__ x, float* __restrict__ values, int* __restrict__ indices,
              int rows, int n, int k) {
  __shared__ float cand_v[KMAX][BLOCK];
  __shared__ int cand_i[KMAX][BLOCK];
  __shared__ float red_v[BLOCK];
  __shared__ int red_i[BLOCK];
  __shared__ int red_t[BLOCK];
  int r = blockIdx.x, tid = threadIdx.x;
  if (r >= rows) return;
  const float* row = x + (long long)r * n;

  // 1. per-thread sorted top-k of its columns, in shared memory (column tid of cand_*)
  int cnt = 0;
  for (int c = tid; c < n; c += BLOCK) {
    float v = row[c];
    if (cnt == k && !ranks_before(v, c, cand_v[k - 1][tid], cand_i[k - 1][tid])) continue;
    int p = cnt < k ? cnt++ : k - 1;  // insertion sort: shift worse entries down
    while (p > 0 && ranks_before(v, c, cand_v[p - 1][tid], cand_i[p - 1][tid])) {
      cand_v[p][tid] = cand_v[p - 1][tid];
      cand_i[p][tid] = cand_i[p - 1][tid];
      p--;
    }
    cand_v[p][tid] = v;
    cand_i[p][tid] = c;
  }

  // 2. k rounds of block arg-max over the heads of the per-thread lists
  int head = 0;
  for (int out = 0; out < k; out++) {
    bool has = head < cnt;
    red_v[tid] = has ? cand_v[head][tid] : 0.0f;
    red_i[tid] = has ? cand_i[head][tid] : 0x7fffffff;
    red_t[tid] = has ? tid : -1;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
      if (tid < s) {
        int o = tid + s;
        bool take = red_t[o] >= 0 &&
                    (red_t[tid] < 0 || ranks_before(red_v[o], red_i[o], red_v[tid], red_i[tid]));
        if (take) {
          red_v[tid] = red_v[o];
          red_i[tid] = red_i[o];
          red_t[tid] = red_t[o];
        }
      }
      __syncthreads();
    }
    if (tid == 0) {
      values[(long long)r * k + out] = red_v[0];
      indices[(long long)r * k + out] = red_i[0];
    }
    if (tid == red_t[0]) head++;
    __syncthreads();
  }
}
