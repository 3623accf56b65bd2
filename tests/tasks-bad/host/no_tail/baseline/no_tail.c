/* Baseline of the broken fixture host/no_tail: processes 4 elements at a time and
 * forgets the remainder, so it is wrong only for n not a multiple of 4 (held-out). */
void no_tail_forward(const float *x, float *y, long long n) {
  for (long long i = 0; i + 3 < n; i += 4) {
    y[i] = 3.0f * x[i];
    y[i + 1] = 3.0f * x[i + 1];
    y[i + 2] = 3.0f * x[i + 2];
    y[i + 3] = 3.0f * x[i + 3];
  }
}
