/* torchproc_test: the trusted PyTorch process's client (gpuexec/daemon/torchproc.h)
 * without torch or a GPU.
 *
 * Usage: torchproc_test SOURCE_DIR BIN_DIR
 *   1. the real driver (BIN_DIR/ka_torch.py) with a `torch` that cannot be imported first
 *      on PYTHONPATH: KA_EUNAVAIL whose message says torch is absent, from which Python,
 *      and why; a Python that does not exist and a driver that does not exist: KA_EUNAVAIL;
 *      no process and no folder left behind by any of them;
 *   2. the protocol end to end with a stand-in driver (tests/fixtures/torch/fake_driver.py):
 *      hello's facts, load of torch2cuda/gelu on a small case, a reference through the
 *      files (inputs float32, outputs double: 2x here), times, the lock fds passed;
 *   3. its faults: a reply that is not JSON (KA_EPARSE), a process that exits (KA_EIO with
 *      its stderr), one that hangs (KA_ETIMEDOUT near the limit, then killed), a refused
 *      request (KA_EINVAL with the reason, and the process still answers), a wrong count
 *      of times (KA_EPARSE), and the outputs untouched after a failed reference.
 * One line per check; exit status 1 on any failure. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "devlock.h"
#include "ka_check.h"
#include "ka_common.h"
#include "task.h"
#include "torchproc.h"

static char tmpdir[PATH_MAX];

/* 1 when no child process is left and TMPDIR holds nothing. */
static int nothing_left(void) {
  int children = waitpid(-1, NULL, WNOHANG) != -1 || errno != ECHILD;
  DIR *d = opendir(tmpdir);
  int entries = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) entries++;
  if (d) closedir(d);
  return !children && entries == 0;
}

static void absent(const char *driver, const char *src) {
  char path[PATH_MAX + 64], err[2048];
  snprintf(path, sizeof path, "%s/tests/fixtures/torch/absent", src);
  setenv("PYTHONPATH", path, 1);
  ka_torch *tp = (ka_torch *)&err;
  int rc = ka_torch_start("python3", driver, "cuda", -1, -1, 30, &tp, NULL, err, sizeof err);
  check(rc == KA_EUNAVAIL && tp == NULL && strstr(err, "torch is absent from") &&
            strstr(err, "kernelarena fixture: torch absent"),
        "torch absent: reported", "%s: %s", ka_strerror(rc), err);
  check(nothing_left(), "torch absent: no process, no folder left", "%s", "checked");
  unsetenv("PYTHONPATH");
  rc = ka_torch_start("/nonexistent/python3", driver, "cuda", -1, -1, 30, &tp, NULL, err,
                      sizeof err);
  check(rc == KA_EUNAVAIL && tp == NULL, "no such Python: unavailable", "%s: %s", ka_strerror(rc),
        err);
  rc = ka_torch_start("python3", "/nonexistent/ka_torch.py", "cuda", -1, -1, 30, &tp, NULL, err,
                      sizeof err);
  check(rc == KA_EUNAVAIL && strstr(err, "/nonexistent/ka_torch.py"), "no such driver: unavailable",
        "%s: %s", ka_strerror(rc), err);
  check(nothing_left(), "after both: no process, no folder left", "%s", "checked");
}

/* Starts the stand-in in mode (KA_FAKE_TORCH), with the lock's fds. */
static ka_torch *fake(const char *src, const char *mode, double timeout_s, int m, int t) {
  char path[PATH_MAX + 64], err[1024];
  snprintf(path, sizeof path, "%s/tests/fixtures/torch/fake_driver.py", src);
  setenv("KA_FAKE_TORCH", mode, 1);
  ka_torch *tp = NULL;
  ka_torch_info info;
  int rc = ka_torch_start("python3", path, "cuda", m, t, timeout_s, &tp, &info, err, sizeof err);
  check(rc == KA_OK && !strcmp(info.torch, "0.0-fake") && !strcmp(info.device_name, "fake"),
        "stand-in starts", "%s (%s): %s", mode, ka_strerror(rc), rc ? err : info.torch);
  return tp;
}

static void protocol(const char *src, const ka_task *gelu) {
  char err[1024];
  int m = -1, t = -1;
  check(ka_devlock_create(&m, &t, err, sizeof err) == KA_OK, "device lock", "%s", "made");
  ka_torch *tp = fake(src, "ok", 30, m, t);
  if (!tp) return;
  ka_case c = {.name = "tiny"};
  c.values[0] = 1000;
  int rc = ka_torch_load(tp, gelu, &c, err, sizeof err);
  check(rc == KA_OK, "load torch2cuda/gelu, n = 1000", "%s %s", ka_strerror(rc), rc ? err : "");
  float *x = malloc(1000 * sizeof *x);
  double *y = malloc(1000 * sizeof *y);
  for (int i = 0; i < 1000; i++) x[i] = (float)i * 0.25f - 7.0f, y[i] = -1;
  void *tensors[2] = {x, y};
  int bits = 0;
  rc = ka_torch_reference(tp, tensors, &bits, err, sizeof err);
  int same = 1;
  for (int i = 0; i < 1000; i++) same &= y[i] == 2.0 * x[i];
  check(rc == KA_OK && same && bits == 64, "a reference through the files", "%s bits %d y[3] %g %s",
        ka_strerror(rc), bits, y[3], rc ? err : "");
  double ms[8] = {0}, cs = -1;
  rc = ka_torch_time(tp, "eager", 8, 1, 42, ms, &cs, err, sizeof err);
  check(rc == KA_OK && ms[0] == 0.5 && ms[7] == 0.5 && cs == 0, "8 timed calls", "%s %g %s",
        ka_strerror(rc), ms[7], rc ? err : "");
  ka_torch_stop(tp);
  close(m), close(t);
  free(x), free(y);
  check(nothing_left(), "stopped: no process, no folder left", "%s", "checked");
}

static void faults(const char *src, const ka_task *gelu) {
  char err[1024];
  ka_case c = {.name = "tiny"};
  c.values[0] = 16;
  ka_torch *tp = fake(src, "garbage", 30, -1, -1);
  int rc = tp ? ka_torch_load(tp, gelu, &c, err, sizeof err) : KA_EINTERNAL;
  check(rc == KA_EPARSE && strstr(err, "this is not json"), "not JSON: a parse error", "%s: %s",
        ka_strerror(rc), err);
  ka_torch_stop(tp);

  tp = fake(src, "exit", 30, -1, -1);
  rc = tp ? ka_torch_load(tp, gelu, &c, err, sizeof err) : KA_EINTERNAL;
  check(rc == KA_EIO && strstr(err, "status 3") && strstr(err, "fake driver: giving up on load"),
        "exits: an I/O error with its stderr", "%s: %s", ka_strerror(rc), err);
  rc = tp ? ka_torch_load(tp, gelu, &c, err, sizeof err) : KA_EINTERNAL;
  check(rc == KA_ESTATE, "after it exited: not running", "%s: %s", ka_strerror(rc), err);
  ka_torch_stop(tp);

  tp = fake(src, "hang", 1, -1, -1);
  double t0 = ka_now_s();
  rc = tp ? ka_torch_load(tp, gelu, &c, err, sizeof err) : KA_EINTERNAL;
  double took = ka_now_s() - t0;
  check(rc == KA_ETIMEDOUT && took >= 0.9 && took < 5, "hangs: timed out at the limit",
        "%s after %.2f s: %s", ka_strerror(rc), took, err);
  ka_torch_stop(tp);

  tp = fake(src, "refuse", 30, -1, -1);
  rc = tp ? ka_torch_load(tp, gelu, &c, err, sizeof err) : KA_EINTERNAL;
  check(rc == KA_EINVAL && strstr(err, "Model returned 2 tensors"), "refused: invalid, the reason",
        "%s: %s", ka_strerror(rc), err);
  float x[16] = {1};
  double y[16];
  for (int i = 0; i < 16; i++) y[i] = -3;
  void *tensors[2] = {x, y};
  rc = tp ? ka_torch_reference(tp, tensors, NULL, err, sizeof err) : KA_EINTERNAL;
  check(rc == KA_ESTATE && y[0] == -3 && y[15] == -3,
        "a reference before a load: refused, outputs untouched", "%s: %s", ka_strerror(rc), err);
  rc = tp ? ka_torch_load(tp, gelu, &c, err, sizeof err) : KA_EINTERNAL;
  check(rc == KA_OK, "after a refusal the process still answers", "%s %s", ka_strerror(rc),
        rc ? err : "");
  ka_torch_stop(tp);

  tp = fake(src, "short", 30, -1, -1);
  double ms[4];
  rc = tp ? ka_torch_load(tp, gelu, &c, err, sizeof err) : KA_EINTERNAL;
  if (rc == KA_OK) rc = ka_torch_time(tp, "eager", 4, 0, 1, ms, NULL, err, sizeof err);
  check(rc == KA_EPARSE && strstr(err, "3, want 4"), "3 times for 4 calls: a parse error", "%s: %s",
        ka_strerror(rc), err);
  ka_torch_stop(tp);
  check(nothing_left(), "after the faults: no process, no folder left", "%s", "checked");
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: torchproc_test SOURCE_DIR BIN_DIR\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN); /* as gpuexec: a write to a process that ended is an error */
  snprintf(tmpdir, sizeof tmpdir, "%s/ka-torchproc-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(tmpdir)) return 2;
  setenv("TMPDIR", tmpdir, 1);
  char driver[PATH_MAX + 16], dir[PATH_MAX + 32], err[1024];
  snprintf(driver, sizeof driver, "%s/ka_torch.py", argv[2]);
  snprintf(dir, sizeof dir, "%s/tasks/torch2cuda/gelu", argv[1]);
  ka_task *gelu = NULL;
  int rc = ka_task_load(dir, &gelu, err, sizeof err);
  check(rc == KA_OK, "torch2cuda/gelu loads", "%s", rc ? err : "ok");
  absent(driver, argv[1]);
  if (gelu) protocol(argv[1], gelu);
  if (gelu) faults(argv[1], gelu);
  ka_task_free(gelu);
  rmdir(tmpdir);
  printf("%d passed, %d failed\n", ka_check_pass, ka_check_fail);
  return ka_check_fail ? 1 : 0;
}
