// F.gelu(F.linear(x, weight, bias)), faster: one block of 256 threads per 64 x 64 tile of
// y, each thread a 4 x 4 register tile; 16-wide slices of x and weight staged in shared
// memory k-major (both are k-contiguous), float32 FMAs (no tensor cores, no TF32), then
// bias and the exact GELU in the epilogue.
#define BM 64
#define BN 64
#define BK 16

extern "C" __global__ void __launch_bounds__(256)
    linear_gelu_64x64(const float* __restrict__ x, const float* __restrict__ w,
                      const float* __restrict__ bias, float* __restrict__ y, int m, int n, int k) {
  __shared__ float xs[BK][BM + 4];
  __shared__ float ws[BK][BN + 4];
  int t = threadIdx.x;
  int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  int lr = t >> 2, lk = (t & 3) * 4;  // loader: one row of the tile, 4 consecutive k
  int ty = t >> 4, tx = t & 15;       // compute: rows ty*4.., cols tx*4..
  float acc[4][4] = {};
  for (int k0 = 0; k0 < k; k0 += BK) {
    long long xr = row0 + lr, wr = col0 + lr;
#pragma unroll
    for (int q = 0; q < 4; q++) {
      int kk = k0 + lk + q;
      xs[lk + q][lr] = xr < m && kk < k ? x[xr * k + kk] : 0.0f;
      ws[lk + q][lr] = wr < n && kk < k ? w[wr * k + kk] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk++) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; i++) a[i] = xs[kk][ty * 4 + i], b[i] = ws[kk][tx * 4 + i];
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; i++) {
    int r = row0 + ty * 4 + i;
    if (r >= m) continue;
#pragma unroll
    for (int j = 0; j < 4; j++) {
      int c = col0 + tx * 4 + j;
      if (c >= n) continue;
      float s = acc[i][j] + bias[c];
      y[(long long)r * n + c] = 0.5f * s * (1.0f + erff(s * 0.70710678118654752f));
    }
  }
}
