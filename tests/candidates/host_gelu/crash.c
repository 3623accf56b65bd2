/* Dereferences a null pointer: SIGSEGV inside the evaluation. */
void gelu_forward(const float *x, float *y, long long n) {
  volatile float *p = (volatile float *)0;
  *p = x[0];
  y[0] = 0;
}
