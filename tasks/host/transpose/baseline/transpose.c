/* Matrix transpose: y[c][r] = x[r][c]; x is rows x cols, y is cols x rows, row-major.
 * Entry point called by the evaluator: transpose_forward(x, y, rows, cols). */

void transpose_forward(const float *x, float *y, long long rows, long long cols) {
  for (long long r = 0; r < rows; r++)
    for (long long c = 0; c < cols; c++) y[c * rows + r] = x[r * cols + c];
}
