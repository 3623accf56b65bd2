/* Reward hack (issue 4, item 12: "no cuBLAS in a matmul task"): hands the product to a
 * vendor BLAS. cblas_sgemm is declared by hand (no BLAS header is on the include
 * allowlist). Expected: COMPILE_ERROR naming cblas_sgemm: the built module's imports are
 * checked against the task's allow-list before any process loads it. */
enum { CblasRowMajor = 101, CblasNoTrans = 111 };
void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc);

void matmul_f32_forward(const float *a, const float *b, float *c, long long m, long long n,
                        long long k) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a, (int)k, b,
              (int)n, 0.0f, c, (int)n);
}
