/* Row sums of a row-major float32 matrix: y[r] = sum_c x[r * cols + c].
 * Entry point called by the evaluator: row_sum_forward(x, y, rows, cols). */

void row_sum_forward(const float *x, float *y, long long rows, long long cols) {
  for (long long r = 0; r < rows; r++) {
    float s = 0.0f;
    for (long long c = 0; c < cols; c++) s += x[r * cols + c];
    y[r] = s;
  }
}
