// Writes far outside its output: an illegal address (a sticky CUDA error that poisons
// the context, which is why every evaluation runs in a fresh process).
extern "C" __global__ void gelu_f32(const float* __restrict__ x, float* __restrict__ y,
                                    long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i + (1LL << 40)] = x[i];
}
