/* Never returns. */
void gelu_forward(const float *x, float *y, long long n) {
  volatile int spin = 1;
  while (spin) {
  }
}
