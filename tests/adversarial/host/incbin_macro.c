/* The same read with the directive's name assembled by the assembler (issue 16, class 7,
 * second spelling): a gas macro pastes "inc" and "bin" (and the C string hides both
 * words from a scan of the source), so no ".incbin" appears in the submitted text or
 * in the generated assembly. Expected: COMPILE_ERROR, "uses the directive .macro". */
#include <math.h>
#include <stdio.h>

__asm__(".section .rodata\n"
        ".globl ka_leak\n"
        "ka_leak:\n"
        ".mac" "ro ka_m a, b\n"
        " .\\a\\()\\b \"/etc/passwd\"\n"
        ".endm\n"
        "ka_m inc, bin\n"
        ".byte 0\n"
        ".text\n");
extern const char ka_leak[];

void gelu_forward(const float *x, float *y, long long n) {
  static int done;
  if (!done++) printf("incbin: %.64s\n", ka_leak);
  for (long long i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
}
