/* 3x3 convolution (cross-correlation, as in deep-learning frameworks), stride 1, zero
 * padding 1: y[o][i][j] = sum_{c, di, dj} wt[o][c][di][dj] * x[c][i + di - 1][j + dj - 1].
 * x is cin x h x w, wt is cout x cin x 3 x 3, y is cout x h x w, all float32 row-major.
 * Entry point: conv2d_3x3_forward(x, wt, y, cin, cout, h, w). */

void conv2d_3x3_forward(const float *x, const float *wt, float *y, long long cin, long long cout,
                        long long h, long long w) {
  for (long long o = 0; o < cout; o++)
    for (long long i = 0; i < h; i++)
      for (long long j = 0; j < w; j++) {
        float s = 0.0f;
        for (long long c = 0; c < cin; c++)
          for (int di = 0; di < 3; di++) {
            long long ii = i + di - 1;
            if (ii < 0 || ii >= h) continue;
            for (int dj = 0; dj < 3; dj++) {
              long long jj = j + dj - 1;
              if (jj < 0 || jj >= w) continue;
              s += wt[((o * cin + c) * 3 + di) * 3 + dj] * x[(c * h + ii) * w + jj];
            }
          }
        y[(o * h + i) * w + j] = s;
      }
}
