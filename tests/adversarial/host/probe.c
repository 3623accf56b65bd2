/* Fault: probes the sandbox from inside the entry point (once), prints what each probe
 * got, then computes a correct result. Every probe must be refused. The POSIX calls are
 * declared by hand (their headers are not on the include allowlist); constants are
 * Linux x86-64's. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

int getppid(void);
int setsid(void);
int socket(int domain, int type, int protocol);
long ptrace(int request, int pid, void *addr, void *data);
#define KA_AF_INET 2
#define KA_SOCK_STREAM 1
#define KA_PTRACE_ATTACH 16

static void say(const char *what, int failed) {
  fprintf(stderr, "probe %s: %s\n", what, failed ? strerror(errno) : "ALLOWED");
}

void gelu_forward(const float *x, float *y, long long n) {
  static int done;
  if (!done++) {
    FILE *f = fopen("/etc/passwd", "r");
    say("read /etc/passwd", !f);
    if (f) {
      char buf[256];
      if (fgets(buf, sizeof buf, f)) fprintf(stderr, "LEAK %s", buf);
      fclose(f);
    }
    FILE *w = fopen("/tmp/ka-sandbox-escape.txt", "w");
    say("write /tmp/ka-sandbox-escape.txt", !w);
    if (w) fclose(w);
    say("socket AF_INET", socket(KA_AF_INET, KA_SOCK_STREAM, 0) < 0);
    say("kill parent", kill(getppid(), SIGKILL) < 0);
    say("kill init", kill(1, 0) < 0);
    say("ptrace parent", ptrace(KA_PTRACE_ATTACH, getppid(), 0, 0) < 0);
    say("setsid", setsid() < 0);
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/mem", getppid());
    FILE *mem = fopen(p, "r");
    say("open parent's /proc/PID/mem", !mem);
    if (mem) fclose(mem);
    fflush(stderr);
  }
  for (long long i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
}
