/* Inclusive prefix sum: y[i] = x[0] + ... + x[i], float32 in and out, accumulated in
 * double so that the error does not grow with n. Entry: prefix_scan_forward(x, y, n). */

void prefix_scan_forward(const float *x, float *y, long long n) {
  double s = 0.0;
  for (long long i = 0; i < n; i++) {
    s += x[i];
    y[i] = (float)s;
  }
}
