// y = gelu(x @ weight^T + bias): x [m, k], weight [n, k], bias [n], y [m, n], float32.
// One 16 x 16 block per 16 x 16 tile of y; tiles of x and weight staged through shared
// memory, float32 accumulation (no tensor cores). Compiled with NVRTC; launched as
// launch.yaml says (block must be 16 x 16).
#define TILE 16

extern "C" __global__ void linear_gelu(const float* __restrict__ x,
                                       const float* __restrict__ w,
                                       const float* __restrict__ bias, float* __restrict__ y,
                                       int m, int n, int k) {
  __shared__ float xs[TILE][TILE];
  __shared__ float ws[TILE][TILE + 1];
  int row = blockIdx.y * TILE + threadIdx.y;  // of y and x
  int col = blockIdx.x * TILE + threadIdx.x;  // of y; row of weight
  int wrow = blockIdx.x * TILE + threadIdx.y;
  float acc = 0.0f;
  for (int p0 = 0; p0 < k; p0 += TILE) {
    int p = p0 + threadIdx.x;
    xs[threadIdx.y][threadIdx.x] = row < m && p < k ? x[(long long)row * k + p] : 0.0f;
    ws[threadIdx.y][threadIdx.x] = wrow < n && p < k ? w[(long long)wrow * k + p] : 0.0f;
    __syncthreads();
    for (int q = 0; q < TILE; q++) acc += xs[threadIdx.y][q] * ws[threadIdx.x][q];
    __syncthreads();
  }
  if (row < m && col < n) {
    float s = acc + bias[col];
    y[(long long)row * n + col] = 0.5f * s * (1.0f + erff(s * 0.70710678118654752f));
  }
}
