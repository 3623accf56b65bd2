/* Attack on the baseline's process (issue 16, class 4): the baseline's module process
 * has dlopen'ed workdir/baseline/module.so, and pages of a private file mapping that it
 * has not written follow later writes to the file, so whoever can write that file
 * changes the code the baseline runs (a slower baseline is a larger speedup). The
 * candidate's process (started in workdir/candidate) opens ../baseline/module.so for
 * writing and writes one byte back unchanged, which proves it could patch it. Needs
 * open/pwrite: run with the import allow-list opened (imports: any). Expected now: OK,
 * "patch_baseline: open ... Permission denied" (each module process may write only its
 * own folder), never "patch_baseline: wrote". */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* declared here: <fcntl.h> and <unistd.h> are not on the include allowlist */
int open(const char *path, int flags, ...);
long pread(int fd, void *buf, unsigned long n, long off);
long pwrite(int fd, const void *buf, unsigned long n, long off);
int close(int fd);
#define O_RDWR 2

void gelu_forward(const float *x, float *y, long long n) {
  static int done;
  if (!done++) {
    const char *p = "../baseline/module.so";
    int fd = open(p, O_RDWR);
    if (fd < 0) {
      printf("patch_baseline: open %s for writing: %s\n", p, strerror(errno));
    } else {
      unsigned char b;
      if (pread(fd, &b, 1, 64) == 1 && pwrite(fd, &b, 1, 64) == 1)
        printf("patch_baseline: wrote into %s (the baseline's loaded code)\n", p);
      else
        printf("patch_baseline: opened %s but could not write: %s\n", p, strerror(errno));
      close(fd);
    }
    fflush(stdout);
  }
  for (long long i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
}
