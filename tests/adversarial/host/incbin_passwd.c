/* File read by the assembler (issue 16, class 7): the include allowlist covers
 * preprocessor directives only, and a top-level asm statement with `.incbin` embeds any
 * file the compiler can read into the module, whose code then prints it (the runtime log
 * would show /etc/passwd, or on a kernel without Landlock the task's reference.c and
 * held-out cases). Expected: COMPILE_ERROR, "uses the directive .incbin" (the generated
 * assembly is checked before it is assembled), never the file's content. */
#include <math.h>
#include <stdio.h>

__asm__(".section .rodata\n"
        ".globl ka_leak\n"
        "ka_leak:\n"
        ".incbin \"/etc/passwd\"\n"
        ".byte 0\n"
        ".text\n");
extern const char ka_leak[];

void gelu_forward(const float *x, float *y, long long n) {
  static int done;
  if (!done++) printf("incbin: %.64s\n", ka_leak);
  for (long long i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
}
