/* Matrix product C = A B in float32, row-major: A is m x k, B is k x n, C is m x n.
 * Entry point called by the evaluator: matmul_f32_forward(a, b, c, m, n, k). */

void matmul_f32_forward(const float *a, const float *b, float *c, long long m, long long n,
                        long long k) {
  for (long long i = 0; i < m; i++) {
    for (long long j = 0; j < n; j++) c[i * n + j] = 0.0f;
    for (long long p = 0; p < k; p++) {
      float av = a[i * k + p];
      for (long long j = 0; j < n; j++) c[i * n + j] += av * b[p * n + j];
    }
  }
}
