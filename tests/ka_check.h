/* One-line checks for the C test programs: `check(ok, name, fmt, ...)` prints
 * "ok   name: detail" or "FAIL name: detail" and counts passes and failures in
 * ka_check_pass / ka_check_fail (the program exits 1 when ka_check_fail > 0).
 * Header-only, for single-threaded test programs. */
#ifndef KA_CHECK_H
#define KA_CHECK_H

#include <stdarg.h>
#include <stdio.h>

static int ka_check_fail, ka_check_pass;

static void check(int ok, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void check(int ok, const char *name, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s %s: ", ok ? "ok  " : "FAIL", name);
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
  if (ok)
    ka_check_pass++;
  else
    ka_check_fail++;
}

#endif
