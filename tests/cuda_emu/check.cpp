// tests/torch_cuda_emu.sh: one torch2cuda kernel (KERNEL_FILE, KNAME; the T_* macro picks
// the task) on small odd sizes against a double reference, printed as "worst W" (the
// largest error over the task's allowance; inf for NaN).
#include "cuda_emu.h"
#include <cstdio>
#include <random>
#include KERNEL_FILE
static std::mt19937 rng(7);
static float nrm(float m, float s) {
  std::normal_distribution<float> d(m, s);
  return d(rng);
}
static double worst(const std::vector<float> &y, const std::vector<double> &ref, double atol,
                    double rtol) {
  double mx = 0, w = 0;
  for (double r : ref) mx = std::max(mx, std::fabs(r));
  for (size_t i = 0; i < y.size(); i++) {
    double e = std::fabs(y[i] - ref[i]) / (atol * mx + rtol * std::fabs(ref[i]));
    if (std::isnan(e)) return INFINITY;
    if (e > w) w = e;
  }
  return w;
}
int main() {
#if defined(T_SOFTMAX) || defined(T_SUM)
  for (int cols : {97, 1024, 1003}) {
    int rows = 21;
    std::vector<float> x(rows * cols), y(rows * cols, NAN), ys(rows, NAN);
    for (auto &v : x) v = nrm(0, 2);
#ifdef T_SOFTMAX
    launch(dim3{GRID(rows), 1, 1}, dim3{256, 1, 1}, [&] { KNAME(x.data(), y.data(), rows, cols); });
    std::vector<double> ref(rows * cols);
    for (int r = 0; r < rows; r++) {
      double m = -INFINITY, s = 0;
      for (int c = 0; c < cols; c++) m = std::max(m, (double)x[r * cols + c]);
      for (int c = 0; c < cols; c++) s += exp(x[r * cols + c] - m);
      for (int c = 0; c < cols; c++) ref[r * cols + c] = exp(x[r * cols + c] - m) / s;
    }
    printf("softmax cols %d: worst %.3f\n", cols, worst(y, ref, 1e-6, 1e-5));
#else
    launch(dim3{GRID(rows), 1, 1}, dim3{256, 1, 1},
           [&] { KNAME(x.data(), ys.data(), rows, cols); });
    std::vector<double> ref(rows);
    for (int r = 0; r < rows; r++) {
      double s = 0;
      for (int c = 0; c < cols; c++) s += x[r * cols + c];
      ref[r] = s;
    }
    printf("sum cols %d: worst %.3f\n", cols, worst(ys, ref, 2e-5, 1e-5));
#endif
  }
#endif
#ifdef T_SSM
  int rows = 9, cols = 1001;
  std::vector<float> x(rows * cols), mk(rows * cols), y(rows * cols, NAN);
  for (auto &v : x) v = nrm(0, 8);
  for (auto &v : mk) v = std::uniform_real_distribution<float>(-6, 0)(rng);
  launch(dim3{(unsigned)rows, 1, 1}, dim3{256, 1, 1},
         [&] { softmax_scale_mask(x.data(), mk.data(), y.data(), rows, cols); });
  std::vector<double> ref(rows * cols);
  for (int r = 0; r < rows; r++) {
    double m = -INFINITY, s = 0;
    for (int c = 0; c < cols; c++)
      m = std::max(m, (double)x[r * cols + c] * 0.125 + mk[r * cols + c]);
    for (int c = 0; c < cols; c++) s += exp((double)x[r * cols + c] * 0.125 + mk[r * cols + c] - m);
    for (int c = 0; c < cols; c++)
      ref[r * cols + c] = exp((double)x[r * cols + c] * 0.125 + mk[r * cols + c] - m) / s;
  }
  printf("softmax_scale_mask: worst %.3f\n", worst(y, ref, 1e-6, 1e-5));
#endif
#ifdef T_LN
  int rows = 7, hidden = 1029;
  std::vector<float> x(rows * hidden), w(hidden), b(hidden), y(rows * hidden, NAN);
  for (auto &v : x) v = nrm(.5, 2);
  for (auto &v : w) v = nrm(1, .5);
  for (auto &v : b) v = nrm(0, .5);
  launch(dim3{(unsigned)rows, 1, 1}, dim3{256, 1, 1},
         [&] { layernorm_f32(x.data(), w.data(), b.data(), y.data(), rows, hidden); });
  std::vector<double> ref(rows * hidden);
  for (int r = 0; r < rows; r++) {
    double mu = 0, var = 0;
    for (int c = 0; c < hidden; c++) mu += x[r * hidden + c];
    mu /= hidden;
    for (int c = 0; c < hidden; c++) var += (x[r * hidden + c] - mu) * (x[r * hidden + c] - mu);
    var /= hidden;
    for (int c = 0; c < hidden; c++)
      ref[r * hidden + c] = (x[r * hidden + c] - mu) / sqrt(var + 1e-5) * w[c] + b[c];
  }
  printf("layernorm: worst %.3f\n", worst(y, ref, 1e-5, 1e-5));
#endif
#ifdef T_LIN
  int m = 70, n = 90, k = 100;
  std::vector<float> x(m * k), w(n * k), b(n), y(m * n, NAN);
  for (auto &v : x) v = nrm(0, 1);
  for (auto &v : w) v = nrm(0, .03);
  for (auto &v : b) v = nrm(0, .5);
  launch(dim3{GX, GY, 1}, dim3{BX, BY, 1},
         [&] { KNAME(x.data(), w.data(), b.data(), y.data(), m, n, k); });
  std::vector<double> ref(m * n);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = b[j];
      for (int p = 0; p < k; p++) s += (double)x[i * k + p] * w[j * k + p];
      ref[i * n + j] = 0.5 * s * (1 + erf(s / sqrt(2.0)));
    }
  printf("linear_gelu: worst %.3f\n", worst(y, ref, 1e-5, 1e-5));
#endif
}
