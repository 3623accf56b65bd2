// torch2cuda/softmax, adversarial: computes y, then zeroes its input x (INCORRECT:
// the runner checks the inputs after every call).
// Tree reduction over the block (op: 0 max, 1 sum); every thread gets the result.
__device__ float block_reduce(float v, float* sh, int op) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (unsigned int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k)
      sh[threadIdx.x] = op ? sh[threadIdx.x] + sh[threadIdx.x + k]
                           : fmaxf(sh[threadIdx.x], sh[threadIdx.x + k]);
    __syncthreads();
  }
  float res = sh[0];
  __syncthreads();  // sh is reused by the next reduction
  return res;
}

extern "C" __global__ void softmax_rows(float* x, float* __restrict__ y, int rows, int cols) {
  __shared__ float sh[1024];
  int r = blockIdx.x;
  if (r >= rows) return;
  float* xr = x + (long long)r * cols;
  float* yr = y + (long long)r * cols;
  float m = __int_as_float(0xff800000);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
  m = block_reduce(m, sh, 0);
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += expf(xr[c] - m);
  s = block_reduce(s, sh, 1);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) / s;
  __syncthreads();
  for (int c = threadIdx.x; c < cols; c += blockDim.x) xr[c] = 0.0f;
}
