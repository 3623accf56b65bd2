/* Fault: leaves processes behind that escape the process group (setsid, double fork),
 * then computes a correct result. With seccomp on, the first fork stops the evaluation;
 * without it the supervisor must kill both processes and report them. (An escapee that
 * kept the evaluation's descriptors open would hold the runner up until the deadline:
 * TIMEOUT, and the same kill.) The POSIX calls are declared by hand (their headers are
 * not on the include allowlist). */
#include <math.h>

int fork(void);
int setsid(void);
int pause(void);
int prctl(int option, ...);
int close(int fd);
#define PR_SET_NAME 15

void gelu_forward(const float *x, float *y, long long n) {
  static int started;
  if (!started++ && fork() == 0) {
    setsid();
    prctl(PR_SET_NAME, "ka-escapee");
    /* a daemon's manners: let go of the evaluation's pipes and sockets, so that only
     * the supervisor can find it */
    for (int fd = 0; fd < 1024; fd++) close(fd);
    if (fork() == 0) prctl(PR_SET_NAME, "ka-escapee");
    for (;;) pause();
  }
  for (long long i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
}
