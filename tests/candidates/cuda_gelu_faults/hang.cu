// Never finishes: the evaluation's deadline must kill it.
extern "C" __global__ void gelu_f32(const float* __restrict__ x, float* __restrict__ y,
                                    long long n) {
  volatile int spin = 1;
  while (spin) {
  }
}
