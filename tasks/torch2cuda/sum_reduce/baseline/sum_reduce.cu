// torch.sum(x, dim=1): one block per row, each thread sums a strided part of the row,
// then a shared-memory tree sum. blockDim.x must be a power of two, at most 1024.
// Compiled with NVRTC; launched as launch.yaml says.
extern "C" __global__ void sum_rows(const float* __restrict__ x, float* __restrict__ y, int rows,
                                    int cols) {
  __shared__ float sh[1024];
  int r = blockIdx.x;
  if (r >= rows) return;  // uniform per block
  const float* xr = x + (long long)r * cols;
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
  sh[threadIdx.x] = s;
  __syncthreads();
  for (unsigned int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) sh[threadIdx.x] += sh[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[r] = sh[0];
}
