/* hip_select_test: backend selection with the host, cuda and hip backends all present.
 *
 * Usage: hip_select_test <bin folder> <tasks folder>
 * The bin folder holds ka-runner (host backend built in), ka_backend_cuda.so,
 * ka_backend_hip.so, gpuexec, envserver and envctl, as the build leaves them. Checks:
 *  1. both GPU modules load into one process through the registry (gpuexec/backends/backend.c),
 *     each serving its own ops table, a second load returning the same table; an
 *     unknown or unsafe backend name is refused with a reason;
 *  2. `ka-runner --discover B` (what gpuexec runs for each backend) exits 0 for host,
 *     cuda and hip; host lists this machine, and a GPU backend without a device lists 0
 *     devices and says why on stderr (with devices, each has that backend's name, a
 *     wavefront/warp size and an arch of the vendor's form);
 *  3. every task lists the backends that may run it: hip tasks cuda and hip, cuda tasks
 *     cuda, C tasks host (unless the task names its own list);
 *  4. end to end (envctl with its embedded envserver and gpuexec --backends auto, all
 *     three backends present): gpuexec starts a worker for each backend that found a
 *     device and says why the others have none; a hip2hip task runs on a cuda or hip
 *     device or, when only host devices exist, is refused with a message naming what it
 *     needs and what is offered; a host task runs on the host worker.
 * One line per check; exit status 1 on any failure. */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "ka_check.h"
#include "ka_common.h"
#include "kernelarena.pb-c.h"
#include "task.h"

/* backend.c refers to the built-in host backend, which lives in ka-runner (tested
 * through ka-runner --discover below). */
const ka_backend_ops *ka_backend_host(void) {
  return NULL;
}

/* Runs argv with stdout into *out (bytes, NUL-terminated; out->len excludes the NUL)
 * and stderr into *errs (malloc'd; caller frees both), killing it after timeout_s. Returns the exit
 * status, 128 + signal, or -1 if it could not start. The child gets its own process group, which is
 * killed (SIGKILL) once it has exited or timed out, so nothing it started stays behind. */
static int run(char *const argv[], double timeout_s, ka_sb *out, char **errs) {
  char tmpl_o[] = "/tmp/ka-hipsel-out-XXXXXX", tmpl_e[] = "/tmp/ka-hipsel-err-XXXXXX";
  int fo = mkstemp(tmpl_o), fe = mkstemp(tmpl_e);
  memset(out, 0, sizeof *out);
  *errs = NULL;
  if (fo < 0 || fe < 0) return -1;
  unlink(tmpl_o);
  unlink(tmpl_e);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    setpgid(0, 0);
    dup2(fo, 1);
    dup2(fe, 2);
    execv(argv[0], argv);
    _exit(127);
  }
  setpgid(pid, pid);
  int st = 0;
  double t0 = ka_now_s();
  int done = 0;
  while (!done) {
    pid_t w = waitpid(pid, &st, WNOHANG);
    if (w == pid) {
      done = 1;
    } else if (ka_now_s() - t0 > timeout_s) {
      kill(-pid, SIGKILL);
      waitpid(pid, &st, 0);
      done = 1;
    } else {
      usleep(20000);
    }
  }
  kill(-pid, SIGKILL); /* whatever the child left in its group */
  int fds[2] = {fo, fe};
  ka_sb err_sb = {0};
  ka_sb *dst[2] = {out, &err_sb};
  for (int i = 0; i < 2; i++) {
    char buf[4096];
    ssize_t n;
    lseek(fds[i], 0, SEEK_SET);
    while ((n = read(fds[i], buf, sizeof buf)) > 0) ka_sb_append(dst[i], buf, (size_t)n);
    close(fds[i]);
  }
  *errs = ka_sb_take(&err_sb);
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return -1;
}

/* 1. both GPU modules in one process */
static void check_modules(void) {
  char err[1024] = "";
  const ka_backend_ops *cu = ka_backend_load("cuda", err, sizeof err);
  check(cu && !strcmp(cu->name, "cuda") && cu->api_version == KA_BACKEND_API_VERSION, "load cuda",
        "%s", cu ? cu->name : err);
  err[0] = '\0';
  const ka_backend_ops *hp = ka_backend_load("hip", err, sizeof err);
  check(hp && !strcmp(hp->name, "hip") && hp->api_version == KA_BACKEND_API_VERSION, "load hip",
        "%s", hp ? hp->name : err);
  check(cu && hp && cu != hp && cu->compile != hp->compile, "distinct ops tables",
        "cuda %p, hip %p", (const void *)cu, (const void *)hp);
  check(ka_backend_load("hip", err, sizeof err) == hp &&
            ka_backend_load("cuda", err, sizeof err) == cu,
        "second load", "same tables");
  err[0] = '\0';
  const ka_backend_ops *no = ka_backend_load("rocm", err, sizeof err);
  check(!no && strstr(err, "not available"), "unknown backend", "%s", err);
  err[0] = '\0';
  no = ka_backend_load("../hip", err, sizeof err);
  check(!no && strstr(err, "bad backend name"), "unsafe backend name", "%s", err);
  /* both answer device_count without failing, whatever the machine */
  int n = -1;
  err[0] = '\0';
  if (hp) {
    int rc = hp->device_count(&n, err, sizeof err);
    check(rc == KA_OK && n >= 0 && (n > 0 || err[0]), "hip device_count", "%d device(s)%s%s", n,
          n ? "" : ": ", n ? "" : err);
  }
  n = -1;
  err[0] = '\0';
  if (cu) {
    int rc = cu->device_count(&n, err, sizeof err);
    check(rc == KA_OK && n >= 0 && (n > 0 || err[0]), "cuda device_count", "%d device(s)%s%s", n,
          n ? "" : ": ", n ? "" : err);
  }
}

/* 2. ka-runner --discover B; returns the number of devices found (-1 on failure). */
static int check_discover(const char *bin, const char *backend) {
  char runner[PATH_MAX];
  snprintf(runner, sizeof runner, "%s/ka-runner", bin);
  char *argv[] = {runner, "--discover", (char *)backend, NULL};
  ka_sb out = {0};
  char *errs = NULL;
  int st = run(argv, 120, &out, &errs);
  char name[64];
  snprintf(name, sizeof name, "discover %s", backend);
  int ndev = -1;
  if (st != 0) {
    check(0, name, "ka-runner exited with %d: %s", st, errs ? errs : "");
  } else {
    Kernelarena__V1__DescribeResponse *d =
        kernelarena__v1__describe_response__unpack(NULL, out.len, (uint8_t *)(out.s ? out.s : ""));
    if (!d) {
      check(0, name, "undecodable discovery output");
    } else {
      ndev = (int)d->n_devices;
      int ok = 1;
      for (size_t i = 0; i < d->n_devices; i++) {
        const Kernelarena__V1__Device *dv = d->devices[i];
        ok &= dv->backend && !strcmp(dv->backend, backend) && dv->warp_size > 0;
        if (!strcmp(backend, "cuda")) ok &= dv->arch && !strncmp(dv->arch, "sm_", 3);
        if (!strcmp(backend, "hip")) ok &= dv->arch && !strncmp(dv->arch, "gfx", 3);
        printf("     %s device %d: %s (%s), warp/wavefront %d\n", backend, dv->index,
               dv->name ? dv->name : "", dv->arch ? dv->arch : "", dv->warp_size);
      }
      size_t el = errs ? strlen(errs) : 0;
      while (el && errs[el - 1] == '\n') errs[--el] = '\0';
      if (!strcmp(backend, "host"))
        check(ok && ndev >= 1, name, "%d device(s)", ndev);
      else if (ndev == 0)
        check(el > 0 && (strcmp(backend, "hip") || strstr(errs, "AMD") || strstr(errs, "ROCm")),
              name, "0 devices, reason: %s", errs);
      else
        check(ok, name, "%d device(s)", ndev);
      kernelarena__v1__describe_response__free_unpacked(d, NULL);
    }
  }
  ka_sb_free(&out);
  free(errs);
  return ndev;
}

/* 3. the backends each task accepts */
static void check_task_backends(const char *root) {
  ka_registry *reg = NULL;
  char err[1024] = "";
  int rc = ka_registry_load(root, 0, &reg, err, sizeof err);
  check(rc == KA_OK, "registry", "%s: %d tasks%s%s", root, reg ? reg->ntasks : 0, rc ? ": " : "",
        rc ? err : "");
  if (rc) return;
  int nbad = 0, nhip = 0;
  for (int i = 0; i < reg->ntasks; i++) {
    const ka_task *t = reg->tasks[i];
    int cu = 0, hp = 0, host = 0;
    for (int b = 0; b < t->nbackends; b++) {
      cu |= !strcmp(t->backends[b], "cuda");
      hp |= !strcmp(t->backends[b], "hip");
      host |= !strcmp(t->backends[b], "host");
    }
    int ok;
    if (!strcmp(t->language, "hip"))
      ok = cu && hp && !host, nhip++;
    else if (!strcmp(t->language, "cuda") || !strcmp(t->language, "triton"))
      ok = cu && !hp && !host;
    else
      ok = host && !cu && !hp;
    if (!ok) {
      nbad++;
      printf("     %s (%s): backends", t->id, t->language);
      for (int b = 0; b < t->nbackends; b++) printf(" %s", t->backends[b]);
      printf("\n");
    }
  }
  check(nbad == 0 && nhip > 0, "task backends",
        "%d tasks: hip tasks run on cuda or hip (%d), cuda and triton tasks on cuda, C tasks on "
        "host; %d "
        "differ",
        reg->ntasks, nhip, nbad);
  ka_registry_free(reg);
}

/* 4. envctl episode with the embedded server and gpuexec --backends auto */
static void check_episode(const char *bin, const char *tasks, const char *task, int gpu_devices) {
  char envctl[PATH_MAX];
  snprintf(envctl, sizeof envctl, "%s/envctl", bin);
  char *argv[] = {envctl, "episode", "--task", (char *)task, "--tasks", (char *)tasks, "--backends",
                  "auto", "--seed",  "1",      "--timeout",  "240",     "--verbose",   NULL};
  ka_sb out = {0};
  char *errs = NULL;
  double t0 = ka_now_s();
  int st = run(argv, 300, &out, &errs);
  char name[128];
  snprintf(name, sizeof name, "episode %s", task);
  const char *o = out.s ? out.s : "", *e = errs ? errs : "";
  int is_hip = !strncmp(task, "hip2hip/", 8);
  if (is_hip && gpu_devices == 0) {
    /* refused: what the task needs and what the executors offer */
    int ok = st != 0 &&
             (strstr(o, "needs a cuda or hip device") || strstr(e, "needs a cuda or hip device")) &&
             (strstr(o, "offer: host") || strstr(e, "offer: host"));
    check(ok, name, "exit %d in %.1f s, refused on a host-only machine: %s", st, ka_now_s() - t0,
          ok ? "needs a cuda or hip device; offered: host" : "unexpected output");
    if (!ok) printf("--- stdout\n%s--- stderr\n%s---\n", o, e);
  } else {
    int ok = st == 0 && strstr(o, "step 1: status OK");
    check(ok, name, "exit %d in %.1f s: %s", st, ka_now_s() - t0,
          ok ? "step 1: status OK" : "unexpected output");
    if (!ok) printf("--- stdout\n%s--- stderr\n%s---\n", o, e);
  }
  /* gpuexec (under --verbose) said what it found on each backend */
  if (!is_hip) {
    int hip_said = strstr(e, "backend hip:") != NULL || strstr(e, "/hip:0") != NULL;
    int cuda_said = strstr(e, "backend cuda:") != NULL || strstr(e, "/cuda:0") != NULL;
    int host_worker = strstr(e, "/host:0") != NULL;
    check(hip_said && cuda_said && host_worker, "gpuexec --backends auto",
          "host worker %s; cuda %s; hip %s", host_worker ? "started" : "MISSING",
          cuda_said ? "reported" : "NOT REPORTED", hip_said ? "reported" : "NOT REPORTED");
    const char *h = strstr(e, "backend hip:");
    if (h) printf("     %.*s\n", (int)strcspn(h, "\n"), h);
    const char *c = strstr(e, "backend cuda:");
    if (c) printf("     %.*s\n", (int)strcspn(c, "\n"), c);
  }
  ka_sb_free(&out);
  free(errs);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s <bin folder> <tasks folder>\n", argv[0]);
    return 2;
  }
  const char *bin = argv[1], *tasks = argv[2];
  setenv("KA_BACKEND_PATH", bin, 1);
  check_modules();
  int nhost = check_discover(bin, "host");
  int ncuda = check_discover(bin, "cuda");
  int nhip = check_discover(bin, "hip");
  (void)nhost;
  check_task_backends(tasks);
  int gpu = (ncuda > 0 ? ncuda : 0) + (nhip > 0 ? nhip : 0);
  /* The episodes use a copy of the two tasks with a generous evaluation limit: on a
   * loaded CI machine the host baseline alone can take tens of seconds, and this test
   * is about where a task runs, not how fast. */
  char work[] = "/tmp/ka-hipsel-XXXXXX";
  if (!mkdtemp(work)) {
    check(0, "temporary folder", "mkdtemp failed");
  } else {
    char script[3 * PATH_MAX];
    snprintf(
        script, sizeof script,
        "mkdir -p '%s/tasks/host' '%s/tasks/hip2hip' && cp -r '%s/host/gelu' '%s/tasks/host/' "
        "&& cp -r '%s/hip2hip/gelu' '%s/tasks/hip2hip/' && sed -i 's/^timeout_s: .*/timeout_s: "
        "300/' '%s/tasks/host/gelu/task.yaml' '%s/tasks/hip2hip/gelu/task.yaml'",
        work, work, tasks, work, tasks, work, work, work);
    char *sh[] = {"/bin/sh", "-c", script, NULL};
    ka_sb o = {0};
    char *e = NULL;
    int st = run(sh, 60, &o, &e);
    check(st == 0, "task copy", "%s/tasks%s%s", work, st ? ": " : "", st && e ? e : "");
    ka_sb_free(&o);
    free(e);
    char wt[PATH_MAX + 8];
    snprintf(wt, sizeof wt, "%s/tasks", work);
    if (st == 0) {
      check_episode(bin, wt, "host/gelu", gpu);
      check_episode(bin, wt, "hip2hip/gelu", gpu);
    }
    ka_rmtree(work);
  }
  printf("%d passed, %d failed\n", ka_check_pass, ka_check_fail);
  return ka_check_fail ? 1 : 0;
}
