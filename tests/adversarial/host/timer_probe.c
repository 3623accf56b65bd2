/* Probe of the timer class (red team 2026-12-01): thousands of sleeping threads plus
 * POSIX timers firing during the baseline's calls made the kernel walk every thread for
 * each expiry in interrupt time, which no process's CPU clock shows: the baseline slowed
 * by a third and identical code scored 1.34x. Module processes may not arm timers
 * (timer_create, timer_settime, setitimer, alarm, timerfd: EPERM). This probe asks for
 * each by a raw system call (no import); if any is granted, it returns wrong outputs, so
 * a sandbox that lets timers through is INCORRECT. Expected: OK (every call refused;
 * the runtime log names the results). x86-64 system call numbers. */
#include <math.h>
#include <stdio.h>

static long sys3(long nr, long a, long b, long c) {
  long r;
  __asm__ volatile("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return r;
}

static int granted = -1;

static int any_timer_granted(void) {
  int timer_id = 0;
  long itv[4] = {0, 1000, 0, 1000}; /* an interval timer of 1 ms */
  long tc = sys3(222, 1 /* CLOCK_MONOTONIC */, 0, (long)&timer_id); /* timer_create */
  long si = sys3(38, 0 /* ITIMER_REAL */, (long)itv, 0);            /* setitimer */
  long al = sys3(37, 3600, 0, 0);                                   /* alarm */
  long tf = sys3(283, 1 /* CLOCK_MONOTONIC */, 0, 0);               /* timerfd_create */
  fprintf(stderr, "timer_probe: timer_create %ld setitimer %ld alarm %ld timerfd_create %ld\n",
          tc, si, al, tf);
  if (si == 0) sys3(38, 0, (long)(long[4]){0, 0, 0, 0}, 0); /* disarm before any SIGALRM */
  if (al >= 0) sys3(37, 0, 0, 0);
  return tc >= 0 || si >= 0 || al >= 0 || tf >= 0;
}

void gelu_forward(const float *x, float *y, long long n) {
  if (granted < 0) granted = any_timer_granted();
  for (long long i = 0; i < n; i++) {
    double v = x[i];
    y[i] = granted ? 0.0f : (float)(0.5 * v * (1.0 + erf(v * 0.70710678118654752440)));
  }
}
