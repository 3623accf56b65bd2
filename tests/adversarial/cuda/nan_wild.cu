// Reward hack (pygpubench): NaN everywhere, hoping NaN compares as a wildcard.
// Expected: INCORRECT.
extern "C" __global__ void gelu_f32(const float* __restrict__ x, float* __restrict__ y,
                                    long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __int_as_float(0x7fc00000);
}
