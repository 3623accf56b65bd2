/* Trusted reference for instruction2triton/knn, in double precision.
 * ABI (docs/tasks.md): tensors[i] is tensor i of task.yaml; inputs hold their dtype,
 * outputs are double arrays of the same element count; params[j] is param j.
 * Brute force: for each query, the k smallest squared Euclidean distances
 * sum_d (q_d - p_d)^2 over all points, ascending, kept in a sorted list updated by
 * insertion. For speed the points are copied once to double, coordinate-major, and
 * processed in blocks of PB points that a block of QB queries reuses from cache; the
 * distances of one block are computed branch-free (vectorizable), then scanned. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define KMAX 64
#define QB 32
#define PB 256

void knn_ref(void *const *tensors, const int64_t *params) {
  const float *qs = tensors[0], *pts = tensors[1];
  double *dist = tensors[2];
  int64_t nq = params[0], npts = params[1], dim = params[2], k = params[3];
  if (k > KMAX || k > npts) return; /* outside the task's shapes; leaves the outputs alone */
  double *pt = malloc(sizeof(double) * (size_t)(npts * dim)); /* pt[d * npts + j] */
  if (!pt) {
    for (int64_t i = 0; i < nq * k; i++) dist[i] = NAN; /* out of memory: fail loudly */
    return;
  }
  for (int64_t j = 0; j < npts; j++)
    for (int64_t d = 0; d < dim; d++) pt[d * npts + j] = pts[j * dim + d];
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i0 = 0; i0 < nq; i0 += QB) {
    int64_t i1 = i0 + QB < nq ? i0 + QB : nq;
    double best[QB][KMAX], s[PB];
    for (int64_t i = i0; i < i1; i++)
      for (int64_t p = 0; p < k; p++) best[i - i0][p] = INFINITY;
    for (int64_t j0 = 0; j0 < npts; j0 += PB) {
      int64_t nb = j0 + PB < npts ? PB : npts - j0;
      for (int64_t i = i0; i < i1; i++) {
        const float *q = qs + i * dim;
        double *b = best[i - i0];
        for (int64_t jj = 0; jj < nb; jj++) s[jj] = 0;
        for (int64_t d = 0; d < dim; d++) {
          double qd = q[d];
          const double *col = pt + d * npts + j0;
          for (int64_t jj = 0; jj < nb; jj++) {
            double t = qd - col[jj];
            s[jj] += t * t;
          }
        }
        for (int64_t jj = 0; jj < nb; jj++) {
          if (!(s[jj] < b[k - 1])) continue;
          int64_t p = k - 1;
          while (p > 0 && b[p - 1] > s[jj]) {
            b[p] = b[p - 1];
            p--;
          }
          b[p] = s[jj];
        }
      }
    }
    for (int64_t i = i0; i < i1; i++)
      for (int64_t p = 0; p < k; p++) dist[i * k + p] = best[i - i0][p];
  }
  free(pt);
}
