/* Host input draws (common/data.c), old against new in one run: the normal distribution
 * drawn element by element through ka_gen_bits (the generator's definition, and how
 * ka_fill_input drew every element before it drew pairs together) against ka_fill_input
 * (pairs sharing their Philox block and radius, 16 pairs a stage in vector lanes), on one thread (a
 * tensor of one chunk, 2^20 elements) and on every CPU (2^24 elements), with a hash of each output
 * (equal: the same bits). Best of 5 runs. The worker draws every correctness input this way, so
 * this is most of the host reference's cost of a new seed (docs/benchmarks). usage: fill_bench */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data.h"
#include "ka_common.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t fnv64(const void *p, size_t n) {
  const unsigned char *c = p;
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ULL;
  return h;
}

/* Best ns per element of the element-by-element draw of n normals into f (one thread). */
static double by_element(float *f, int64_t n, uint64_t key) {
  double best = 1e30;
  for (int r = 0; r < 5; r++) {
    double t0 = now_s();
    for (int64_t i = 0; i < n; i++) {
      uint64_t bits = ka_gen_bits((uint64_t)i, KA_DT_F32, KA_DIST_NORMAL, 0, 2, key);
      memcpy(f + i, &bits, 4);
    }
    double t = now_s() - t0;
    if (t < best) best = t;
  }
  return best * 1e9 / (double)n;
}

/* Best ns per element of ka_fill_input of n normals into f. */
static double by_fill(float *f, int64_t n, const ka_tensor_spec *s) {
  double best = 1e30;
  for (int r = 0; r < 5; r++) {
    double t0 = now_s();
    ka_fill_input(s, f, n, 7, 0, 0);
    double t = now_s() - t0;
    if (t < best) best = t;
  }
  return best * 1e9 / (double)n;
}

int main(void) {
  ka_tensor_spec s = {.name = "x", .dtype = KA_DT_F32, .dist = KA_DIST_NORMAL, .a = 0, .b = 2};
  int64_t sizes[] = {(int64_t)1 << 20, (int64_t)1 << 24};
  float *f = malloc(sizeof(float) << 24), *g = malloc(sizeof(float) << 24);
  if (!f || !g) return 1;
  printf("%-10s %-9s %-14s %-14s %-7s %s\n", "elements", "threads", "by_element_ns", "fill_ns",
         "ratio", "same_bits");
  for (int k = 0; k < 2; k++) {
    int64_t n = sizes[k];
    /* the element-by-element draw runs on one thread; ka_fill_input on one thread per
     * 2^20-element chunk, so the ratio is printed for the one-thread row only */
    double old_ns = by_element(g, n, ka_fill_key(7, 0, 0));
    double new_ns = by_fill(f, n, &s);
    int same = fnv64(f, (size_t)n * 4) == fnv64(g, (size_t)n * 4);
    char ratio[16] = "-";
    if (!k) snprintf(ratio, sizeof ratio, "%.2f", old_ns / new_ns);
    printf("%-10lld %-9s %-14.1f %-14.1f %-7s %s\n", (long long)n, k ? "all" : "1", old_ns, new_ns,
           ratio, same ? "yes" : "NO");
  }
  free(f);
  free(g);
  return 0;
}
