/* Fault: megabytes of output on stdout and stderr, then a correct result. The log
 * must come back truncated and the executor must not hold it all. */
#include <math.h>
#include <stdio.h>
#include <string.h>

void gelu_forward(const float *x, float *y, long long n) {
  static int done;
  if (!done++) {
    static char line[1024];
    memset(line, 'x', sizeof line - 2);
    line[sizeof line - 2] = '\n';
    for (int i = 0; i < 16 * 1024; i++) { /* 16 MiB each */
      fputs(line, stdout);
      fputs(line, stderr);
    }
    fflush(NULL);
  }
  for (long long i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
}
