/* The envserver and gpuexec that an envctl command without --server starts for itself
 * (envctl.h: ec_embedded_start, ec_embedded_stop). */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "envctl.h"
#include "ka_common.h"

/* The process groups of the embedded servers running now, for ec_embedded_kill_all
 * (a signal handler's reading: each slot written before and after the children run). */
static volatile sig_atomic_t ec_groups[2];

void ec_embedded_kill_all(void) {
  for (int i = 0; i < 2; i++)
    if (ec_groups[i] > 0) kill(-(pid_t)ec_groups[i], SIGKILL);
}

/* Starts argv[0] in its own process group, killed when envctl dies (PR_SET_DEATHSIG);
 * stderr to /dev/null when quiet. Returns the pid, or -1 when fork failed. */
static pid_t ec_spawn(char *const argv[], int quiet) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(125);
    if (quiet) {
      FILE *f = freopen("/dev/null", "w", stderr);
      (void)f;
    }
    execv(argv[0], argv);
    fprintf(stderr, "envctl: cannot start %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  return pid;
}

int ec_embedded_start(const ec_opts *o, ec_embedded *emb, char *err, size_t errlen) {
  memset(emb, 0, sizeof *emb);
  char exe[PATH_MAX];
  if (ka_exe_dir(exe, sizeof exe)) return ka_seterr(err, errlen, KA_ESYS, "no exe dir");
  const char *tmp = getenv("TMPDIR");
  snprintf(emb->state, sizeof emb->state, "%s/kernelarena-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(emb->state)) return ka_seterr(err, errlen, KA_ESYS, "mkdtemp: %s", strerror(errno));
  char srv[PATH_MAX + 16], gx[PATH_MAX + 16], exec_url[320];
  snprintf(srv, sizeof srv, "%s/envserver", exe);
  snprintf(gx, sizeof gx, "%s/gpuexec", exe);
  snprintf(emb->url, sizeof emb->url, "ipc://%s/env.ipc", emb->state);
  snprintf(exec_url, sizeof exec_url, "ipc://%s/exec.ipc", emb->state);
  /* an admin token for held-out scoring (docs/agents.md): 24 random bytes as hex, in the
   * private (0700) state folder, mode 0600; envctl reads it back, agents never see it */
  char tok_path[300], tok[49] = "";
  unsigned char rnd[24];
  snprintf(tok_path, sizeof tok_path, "%s/admin.token", emb->state);
  FILE *rf = fopen("/dev/urandom", "rb");
  if (rf && fread(rnd, 1, sizeof rnd, rf) == sizeof rnd) {
    for (size_t i = 0; i < sizeof rnd; i++) snprintf(tok + 2 * i, 3, "%02x", rnd[i]);
    if (ka_write_file(tok_path, tok, strlen(tok)) == KA_OK) chmod(tok_path, 0600);
  }
  if (rf) fclose(rf);
  char *sargv[] = {
      srv,        "--listen",    emb->url,         "--exec-listen",
      exec_url,   "--tasks",     (char *)o->tasks, "--state",
      emb->state, "--max-steps", "1000",           tok[0] ? "--admin-token-file" : NULL,
      tok_path,   NULL};
  emb->server_pid = ec_spawn(sargv, !o->verbose);
  ec_groups[0] = emb->server_pid;
  char *gargv[] = {gx,
                   "--server",
                   exec_url,
                   "--tasks",
                   (char *)o->tasks,
                   "--backends",
                   (char *)(o->backends ? o->backends : "auto"),
                   o->verbose ? "--verbose" : NULL,
                   NULL};
  emb->exec_pid = ec_spawn(gargv, !o->verbose);
  ec_groups[1] = emb->exec_pid;
  if (emb->server_pid < 0 || emb->exec_pid < 0) {
    ec_embedded_stop(emb, 0);
    return ka_seterr(err, errlen, KA_ESYS, "fork failed");
  }
  /* wait for an executor to register */
  ka_client *c;
  if (ka_client_open(emb->url, &c, err, errlen)) {
    ec_embedded_stop(emb, 0);
    return KA_EUNAVAIL;
  }
  double deadline = ka_now_s() + 60;
  int rc = KA_ETIMEDOUT;
  while (ka_now_s() < deadline) {
    int st;
    if (waitpid(emb->server_pid, &st, WNOHANG) == emb->server_pid) {
      emb->server_pid = 0;
      rc = ka_seterr(err, errlen, KA_EUNAVAIL, "envserver exited (run with --verbose to see why)");
      break;
    }
    if (waitpid(emb->exec_pid, &st, WNOHANG) == emb->exec_pid) {
      emb->exec_pid = 0;
      rc = ka_seterr(err, errlen, KA_EUNAVAIL, "gpuexec exited (run with --verbose to see why)");
      break;
    }
    Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
    Kernelarena__V1__HealthRequest h = KERNELARENA__V1__HEALTH_REQUEST__INIT;
    req.body_case = KERNELARENA__V1__REQUEST__BODY_HEALTH;
    req.health = &h;
    Kernelarena__V1__Response *r;
    char e2[256];
    if (ka_client_call(c, &req, 1000, &r, e2, sizeof e2) == KA_OK) {
      int ready =
          r->body_case == KERNELARENA__V1__RESPONSE__BODY_HEALTH && r->health->executors > 0;
      ka_client_free_response(r);
      if (ready) {
        rc = KA_OK;
        break;
      }
    }
    usleep(100000);
  }
  ka_client_close(c);
  if (rc == KA_ETIMEDOUT)
    ka_seterr(err, errlen, rc, "no executor registered within 60 s (run with --verbose)");
  if (rc) ec_embedded_stop(emb, 0);
  return rc;
}

void ec_embedded_stop(ec_embedded *emb, int keep) {
  pid_t pids[2] = {emb->exec_pid, emb->server_pid};
  for (int i = 0; i < 2; i++) {
    if (pids[i] <= 0) continue;
    kill(pids[i], SIGTERM);
    int st;
    for (int k = 0; k < 50; k++) {
      if (waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        pids[i] = 0;
        break;
      }
      usleep(100000);
    }
    if (pids[i] > 0) {
      kill(-pids[i], SIGKILL);
      waitpid(pids[i], &st, 0);
    }
  }
  emb->exec_pid = emb->server_pid = 0;
  ec_groups[0] = ec_groups[1] = 0;
  if (!keep && emb->state[0]) ka_rmtree(emb->state);
}
