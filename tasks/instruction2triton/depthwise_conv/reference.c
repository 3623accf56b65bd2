/* Trusted reference for instruction2triton/depthwise_conv, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * y[n][c][h][w] = sum_{i,j} wt[c][i][j] * x[n][c][h+i-1][w+j-1], zero padding: PyTorch's
 * Conv2d(C, C, 3, padding=1, groups=C, bias=False). */
#include <stdint.h>

void depthwise_conv_ref(void *const *tensors, const int64_t *params) {
  const float *x = tensors[0], *wt = tensors[1];
  double *y = tensors[2];
  int64_t N = params[0], C = params[1], H = params[2], W = params[3];
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < N * C; plane++) {
    int64_t c = plane % C;
    const float *xp = x + plane * H * W;
    const float *wp = wt + c * 9;
    double *yp = y + plane * H * W;
    for (int64_t h = 0; h < H; h++)
      for (int64_t w = 0; w < W; w++) {
        double acc = 0;
        for (int64_t i = 0; i < 3; i++)
          for (int64_t j = 0; j < 3; j++) {
            int64_t ih = h + i - 1, iw = w + j - 1;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W)
              acc += (double)wp[i * 3 + j] * (double)xp[ih * W + iw];
          }
        yp[h * W + w] = acc;
      }
  }
}
