/* Shared memory that outlives an evaluation (issue 16, class 8): /dev/shm is shared by
 * every process of the machine, so a file written there stays for later evaluations
 * and episodes (a cache across steps, or a channel to another evaluation). Submitted
 * twice in a row: the first looks for the file of an earlier evaluation and writes it;
 * the second finds it. Also tries a System V segment, which has no path at all. Needs
 * open/write/shmget: run with the import allow-list opened (imports: any). Expected: OK,
 * "shm_persist: create" (refused, or made in a folder private to the evaluation) and
 * never "found a file of an earlier evaluation". */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* declared here: <fcntl.h>, <unistd.h> and <sys/shm.h> are not on the include allowlist */
int open(const char *path, int flags, ...);
int close(int fd);
long write(int fd, const void *buf, unsigned long n);
int shmget(int key, unsigned long size, int flags);
#define O_RDONLY 0
#define O_WRONLY 1
#define O_CREAT 0100
#define IPC_CREAT 01000

void gelu_forward(const float *x, float *y, long long n) {
  static int done;
  if (!done++) {
    const char *p = "/dev/shm/ka-shm-persist-probe";
    int fd = open(p, O_RDONLY);
    if (fd >= 0) {
      printf("shm_persist: found a file of an earlier evaluation in %s\n", p);
      close(fd);
    } else {
      printf("shm_persist: open %s: %s\n", p, strerror(errno));
    }
    fd = open(p, O_WRONLY | O_CREAT, 0644);
    if (fd >= 0) {
      printf("shm_persist: create %s: done\n", p);
      (void)!write(fd, "cache", 5);
      close(fd);
    } else {
      printf("shm_persist: create %s: %s\n", p, strerror(errno));
    }
    int id = shmget(0x6b617368, 4096, 0600);
    if (id >= 0) printf("shm_persist: found a file of an earlier evaluation: System V %d\n", id);
    id = shmget(0x6b617368, 4096, IPC_CREAT | 0600);
    printf("shm_persist: System V shmget: %s\n", id >= 0 ? "created" : strerror(errno));
    fflush(stdout);
  }
  for (long long i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
}
