/* host/row_sum baseline with its work done 3 times (tests/candidates/experiment/README.md):
 * correct, about 3x slower. Entry point: row_sum_forward(x, y, rows, cols). */

static volatile int passes = 3; /* volatile: the repeated passes are not optimized away */

void row_sum_forward(const float *x, float *y, long long rows, long long cols) {
  for (int p = 0; p < passes; p++)
    for (long long r = 0; r < rows; r++) {
      float s = 0.0f;
      for (long long c = 0; c < cols; c++) s += x[r * cols + c];
      y[r] = s;
    }
}
