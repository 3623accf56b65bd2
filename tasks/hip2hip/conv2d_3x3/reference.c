/* Trusted reference for hip2hip/conv2d_3x3, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * y[n][k][h][w] = sum_{c,i,j} wt[k][c][i][j] * x[n][c][h+i-1][w+j-1], zero padding,
 * the cross-correlation of PyTorch's Conv2d (padding=1, stride=1, no bias). Each
 * (n, k) output plane is accumulated in place, one shifted input row at a time. */
#include <stdint.h>
#include <string.h>

void conv2d_3x3_ref(void *const *tensors, const int64_t *params) {
  const float *x = tensors[0], *wt = tensors[1];
  double *y = tensors[2];
  int64_t N = params[0], C = params[1], K = params[2], H = params[3], W = params[4];
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t nk = 0; nk < N * K; nk++) {
    int64_t n = nk / K, k = nk % K;
    double *yp = y + nk * H * W;
    memset(yp, 0, sizeof(double) * (size_t)(H * W));
    for (int64_t c = 0; c < C; c++) {
      const float *xp = x + (n * C + c) * H * W;
      for (int64_t i = 0; i < 3; i++)
        for (int64_t j = 0; j < 3; j++) {
          double wv = wt[(k * C + c) * 9 + i * 3 + j];
          /* output columns whose input column w + j - 1 lies in [0, W) */
          int64_t wlo = j == 0 ? 1 : 0, whi = j == 2 ? W - 1 : W;
          for (int64_t h = 0; h < H; h++) {
            int64_t ih = h + i - 1;
            if (ih < 0 || ih >= H) continue;
            const float *xr = xp + ih * W + (j - 1);
            double *yr = yp + h * W;
            for (int64_t w = wlo; w < whi; w++) yr[w] += wv * (double)xr[w];
          }
        }
    }
  }
}
