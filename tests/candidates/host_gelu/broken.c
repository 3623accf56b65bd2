/* Does not compile. */
void gelu_forward(const float *x, float *y, long long n) {
  for (long long i = 0; i < n; i++) y[i] = x[i] * undefined_symbol_here
}
