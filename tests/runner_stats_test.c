/* The adaptive repetition's stopping rule (gpuexec/runner/runner_case.h,
 * rn_median_se_of): on log-normal pair times of known sigma the robust standard error of
 * the median is sqrt(pi / 2) sigma / sqrt(n) within sampling error; 4% of the pairs made
 * 3x slower (a rare outlier, as the H200 showed in 2026-12-04's runs) leave it within 15%
 * of that and are counted as outliers, while the mean's standard error (the rule before)
 * grows past 3x; n < 2 gives 0, a zero time NaN; ratios more than half equal (MAD 0) their
 * RMS deviation; a run of identical ratios 0. On clean
 * data the median's standard error is sqrt(pi / 2) the mean's: the rule asks ~1.57x the
 * repetitions of the mean's rule there, and far fewer where a few calls are slow. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "data.h"
#include "ka_check.h"
#include "runner_case.h"

enum { N = 400 };

/* A standard normal from two uniforms of splitmix64 (Box-Muller). */
static double normal(uint64_t *state) {
  *state += 0x9e3779b97f4a7c15ULL;
  double u1 = ((double)(ka_mix64(*state, 1) >> 11) + 0.5) / 9007199254740992.0;
  double u2 = ((double)(ka_mix64(*state, 2) >> 11) + 0.5) / 9007199254740992.0;
  return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

/* The mean's standard error of the log ratios: sd / sqrt(n). */
static double mean_se(const double *b, const double *c, int n) {
  double s = 0, q = 0;
  for (int r = 0; r < n; r++) {
    double l = log(b[r] / c[r]);
    s += l, q += l * l;
  }
  double m = s / n;
  return sqrt((q - n * m * m) / (n - 1) / n);
}

int main(void) {
  static double b[N], c[N], scratch[2 * N];
  uint64_t st = 42;
  const double sigma = 0.015; /* per call: a 16M-element GELU's on the H200 */
  for (int r = 0; r < N; r++) {
    b[r] = 0.045 * exp(sigma * normal(&st));
    c[r] = 0.045 * exp(sigma * normal(&st));
  }
  /* the log ratio of two such calls has sd sigma sqrt(2) */
  double want = 1.2533141373155 * sigma * sqrt(2.0) / sqrt((double)N);
  int out = -1;
  double se = rn_median_se_of(b, c, N, scratch, &out);
  check(fabs(se / want - 1) < 0.15 && out == 0, "clean: sqrt(pi/2) sigma / sqrt(n)",
        "se %.5f want %.5f, %d outliers", se, want, out);
  double m0 = mean_se(b, c, N);
  for (int r = 0; r < N; r += 25) c[r] *= 3; /* 16 of 400 candidate calls 3x slower */
  double se2 = rn_median_se_of(b, c, N, scratch, &out);
  double m1 = mean_se(b, c, N);
  check(fabs(se2 / se - 1) < 0.15, "outliers: the robust estimate stays",
        "se %.5f then %.5f (mean's %.5f then %.5f)", se, se2, m0, m1);
  check(m1 > 3 * m0, "outliers: the mean's standard error blows up (the rule before)",
        "%.5f then %.5f", m0, m1);
  check(out == N / 25, "outliers counted", "%d, want %d", out, N / 25);
  /* the median itself: a shift of the candidate by 10% moves it, not the spread */
  for (int r = 0; r < N; r++) c[r] *= 1.1;
  double se3 = rn_median_se_of(b, c, N, scratch, NULL);
  check(fabs(se3 / se2 - 1) < 1e-9, "a constant factor leaves the spread", "%.6f %.6f", se2, se3);
  out = -1;
  double se1 = rn_median_se_of(b, c, 1, scratch, &out);
  check(se1 == 0 && out == 0, "n < 2 gives 0", "se %g, %d outliers", se1, out);
  double z = c[7];
  c[7] = 0;
  check(isnan(rn_median_se_of(b, c, N, scratch, NULL)), "a zero time gives NaN", "%s", "not NaN");
  c[7] = z;
  /* quantized: 12 of 20 ratios exactly 1 (a kernel of a few ticks), 8 off by a tick:
   * the MAD is 0, the estimate is not (it would stop at the minimum on nothing) */
  for (int r = 0; r < 20; r++) b[r] = 0.002, c[r] = r < 12 ? 0.002 : (r & 1 ? 0.0025 : 0.0015);
  double seq = rn_median_se_of(b, c, 20, scratch, NULL);
  check(seq > 0.01, "more than half the ratios equal: the RMS deviation, not 0", "se %g", seq);
  for (int r = 0; r < 20; r++) b[r] = c[r] = 1.0;
  out = -1;
  double se4 = rn_median_se_of(b, c, 20, scratch, &out);
  check(se4 == 0 && out == 0, "identical ratios: 0, no outliers", "se %g, %d outliers", se4, out);
  printf("%d passed, %d failed\n", ka_check_pass, ka_check_fail);
  return ka_check_fail ? 1 : 0;
}
