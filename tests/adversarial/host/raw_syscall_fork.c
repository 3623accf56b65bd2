/* Escape attempt that the import check cannot see: fork by a raw `syscall` instruction
 * (inline assembly, x86-64 SYS_fork = 57; other machines: __builtin_trap), so the module
 * imports nothing but erff. The layer behind the check, the seccomp lock of the module
 * process, stops it. Expected: RUNTIME_ERROR, "forbidden system call". */
#include <math.h>

static long raw_fork(void) {
#if defined(__x86_64__)
  long ret;
  __asm__ volatile("syscall" : "=a"(ret) : "a"(57L) : "rcx", "r11", "memory");
  return ret;
#else
  __builtin_trap();
#endif
}

void gelu_forward(const float *x, float *y, long long n) {
  if (raw_fork() == 0)
    for (;;) {
    }
  for (long long i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
}
