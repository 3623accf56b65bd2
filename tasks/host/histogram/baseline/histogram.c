/* Histogram: counts[b] = number of i with x[i] % nbins == b (x[i] >= 0), int32.
 * Entry point called by the evaluator: histogram_forward(x, counts, n, nbins). */

void histogram_forward(const int *x, int *counts, long long n, long long nbins) {
  for (long long b = 0; b < nbins; b++) counts[b] = 0;
  for (long long i = 0; i < n; i++) counts[x[i] % nbins]++;
}
