/* The envserver and gpuexec that an envctl command without --server starts for itself
 * (envctl.h: ec_embedded_start, ec_embedded_stop). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
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

/* ---- the children's stderr without --verbose: a pipe each, drained by one thread that
 * keeps the last EC_TAIL bytes of each, so that a child that exits at startup can be
 * quoted (its last non-empty line) and a long run's output costs no disk */

#define EC_TAIL 4096

typedef struct ec_tail {
  int fd;  /* the pipe's read end (O_NONBLOCK), or -1 */
  int eof; /* every writer closed it (or a read failed): no longer polled */
  char buf[EC_TAIL];
  size_t len;
} ec_tail;

struct ec_tails {
  pthread_mutex_t mu; /* guards t[] (the thread and ec_tails_line both read the pipes) */
  pthread_t thread;
  int started;
  int wake[2];  /* written by ec_tails_free: the thread ends */
  ec_tail t[2]; /* 0 envserver, 1 gpuexec */
};

/* Appends what can be read now from t's pipe to its tail. Called with the mutex held. */
static void ec_tail_read(ec_tail *t) {
  char tmp[EC_TAIL];
  while (t->fd >= 0 && !t->eof) {
    ssize_t n = read(t->fd, tmp, sizeof tmp);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      t->eof = 1;
      return;
    }
    size_t k = (size_t)n;
    if (t->len + k > EC_TAIL) { /* keep the last EC_TAIL bytes */
      size_t drop = t->len + k - EC_TAIL;
      memmove(t->buf, t->buf + drop, t->len - drop);
      t->len -= drop;
    }
    memcpy(t->buf + t->len, tmp, k);
    t->len += k;
  }
}

static void *ec_tails_main(void *arg) {
  struct ec_tails *s = arg;
  for (;;) {
    struct pollfd p[3] = {{.fd = s->wake[0], .events = POLLIN}};
    pthread_mutex_lock(&s->mu);
    int open = 0;
    for (int i = 0; i < 2; i++) {
      p[i + 1].fd = s->t[i].eof ? -1 : s->t[i].fd;
      p[i + 1].events = POLLIN;
      open |= p[i + 1].fd >= 0;
    }
    pthread_mutex_unlock(&s->mu);
    if (!open) break;
    if (poll(p, 3, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (p[0].revents) break;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < 2; i++)
      if (p[i + 1].revents) ec_tail_read(&s->t[i]);
    pthread_mutex_unlock(&s->mu);
  }
  return NULL;
}

/* The last non-empty line child i (0 envserver, 1 gpuexec) wrote to stderr so far, into
 * out (control bytes as '?', cut to outlen); "" when none or s is NULL. Reads what is
 * left in the pipe first (a child that exited has written all it will). */
static void ec_tails_line(struct ec_tails *s, int i, char *out, size_t outlen) {
  out[0] = 0;
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  ec_tail *t = &s->t[i];
  ec_tail_read(t);
  size_t end = t->len;
  while (end > 0 && strchr(" \t\r\n", t->buf[end - 1])) end--;
  size_t start = end;
  while (start > 0 && t->buf[start - 1] != '\n') start--;
  size_t n = end - start < outlen - 1 ? end - start : outlen - 1;
  for (size_t k = 0; k < n; k++) {
    unsigned char c = (unsigned char)t->buf[start + k];
    out[k] = c < 0x20 || c == 0x7f ? '?' : (char)c;
  }
  out[n] = 0;
  pthread_mutex_unlock(&s->mu);
}

/* Ends the reader thread and frees s (NULL is a no-op). */
static void ec_tails_free(struct ec_tails *s) {
  if (!s) return;
  if (s->started) {
    ssize_t w = write(s->wake[1], "x", 1);
    (void)w;
    pthread_join(s->thread, NULL);
  }
  for (int i = 0; i < 2; i++)
    if (s->t[i].fd >= 0) close(s->t[i].fd);
  close(s->wake[0]);
  close(s->wake[1]);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

/* A new reader with a pipe per child: wfd[i] the write end for child i's stderr (the
 * caller closes it once the child is started). NULL when a pipe or memory is lacking. */
static struct ec_tails *ec_tails_new(int wfd[2]) {
  struct ec_tails *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  pthread_mutex_init(&s->mu, NULL);
  s->t[0].fd = s->t[1].fd = wfd[0] = wfd[1] = -1;
  if (pipe2(s->wake, O_CLOEXEC) != 0) {
    pthread_mutex_destroy(&s->mu);
    free(s);
    return NULL;
  }
  for (int i = 0; i < 2; i++) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
      for (int k = 0; k < i; k++) close(wfd[k]);
      ec_tails_free(s);
      return NULL;
    }
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    s->t[i].fd = p[0];
    wfd[i] = p[1];
  }
  return s;
}

/* Starts argv[0] in its own process group, killed when envctl dies (PR_SET_DEATHSIG),
 * its stderr onto errfd when errfd >= 0. Returns the pid, or -1 when fork failed. */
static pid_t ec_spawn(char *const argv[], int errfd) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(125);
    if (errfd >= 0 && dup2(errfd, STDERR_FILENO) < 0) _exit(126);
    execv(argv[0], argv);
    fprintf(stderr, "envctl: cannot start %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  return pid;
}

/* The error of child i (0 envserver, 1 gpuexec) having exited during startup with wait
 * status st: its last stderr line when envctl kept it, else how it ended and where to
 * look. Returns KA_EUNAVAIL. */
static int ec_exited(ec_embedded *emb, int i, int st, char *err, size_t errlen) {
  const char *name = i ? "gpuexec" : "envserver";
  char line[400], how[48];
  ec_tails_line(emb->tails, i, line, sizeof line);
  if (line[0])
    return ka_seterr(err, errlen, KA_EUNAVAIL,
                     "%s exited: %s (run with --verbose for its whole output)", name, line);
  if (WIFSIGNALED(st))
    snprintf(how, sizeof how, "was killed by signal %d", WTERMSIG(st));
  else
    snprintf(how, sizeof how, "exited with status %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  return ka_seterr(err, errlen, KA_EUNAVAIL, "%s %s%s", name, how,
                   emb->tails ? " and wrote nothing on stderr" : " (its output is above)");
}

/* An admin token for held-out scoring (docs/agents.md): 24 random bytes as hex into
 * tok (49 bytes), written to tok_path (in the private 0700 state folder) with mode 0600;
 * envctl reads it back, agents never see it. tok stays "" when /dev/urandom fails. */
static void ec_admin_token(const char *tok_path, char tok[49]) {
  unsigned char rnd[24];
  tok[0] = 0;
  FILE *rf = fopen("/dev/urandom", "rb");
  if (rf && fread(rnd, 1, sizeof rnd, rf) == sizeof rnd) {
    for (size_t i = 0; i < sizeof rnd; i++) snprintf(tok + 2 * i, 3, "%02x", rnd[i]);
    if (ka_write_file(tok_path, tok, strlen(tok)) == KA_OK) chmod(tok_path, 0600);
  }
  if (rf) fclose(rf);
}

/* Starts envserver (sargv) and gpuexec (gargv), their stderr into emb->tails unless
 * verbose. KA_OK, or an error with everything stopped again. */
static int ec_spawn_both(ec_embedded *emb, char *const sargv[], char *const gargv[], int verbose,
                         char *err, size_t errlen) {
  int wfd[2] = {-1, -1};
  if (!verbose && !(emb->tails = ec_tails_new(wfd))) {
    ka_rmtree(emb->state);
    return ka_seterr(err, errlen, KA_ESYS, "cannot make a pipe for the servers' stderr");
  }
  emb->server_pid = ec_spawn(sargv, wfd[0]);
  ec_groups[0] = emb->server_pid;
  emb->exec_pid = ec_spawn(gargv, wfd[1]);
  ec_groups[1] = emb->exec_pid;
  for (int i = 0; i < 2; i++)
    if (wfd[i] >= 0) close(wfd[i]); /* the children hold them: EOF once they are gone */
  if (emb->server_pid < 0 || emb->exec_pid < 0) {
    ec_embedded_stop(emb, 0);
    return ka_seterr(err, errlen, KA_ESYS, "fork failed");
  }
  if (emb->tails) {
    if (pthread_create(&emb->tails->thread, NULL, ec_tails_main, emb->tails) != 0) {
      ec_embedded_stop(emb, 0);
      return ka_seterr(err, errlen, KA_ESYS, "cannot start the thread reading the servers' stderr");
    }
    emb->tails->started = 1;
  }
  return KA_OK;
}

/* 1 when the server at c answers Health with an executor registered. */
static int ec_executor_ready(ka_client *c) {
  Kernelarena__V1__Response *r;
  char e2[256];
  if (ec_health_call(c, 1000, &r, e2, sizeof e2) != KA_OK) return 0;
  int ready = r->body_case == KERNELARENA__V1__RESPONSE__BODY_HEALTH && r->health->executors > 0;
  ka_client_free_response(r);
  return ready;
}

/* Waits up to 60 s for an executor to register with the started server: KA_OK, or the
 * error (a child that exited quoted, ec_exited; a timeout with gpuexec's last line). */
static int ec_wait_ready(ec_embedded *emb, ka_client *c, char *err, size_t errlen) {
  double deadline = ka_now_s() + 60;
  while (ka_now_s() < deadline) {
    int st;
    if (waitpid(emb->server_pid, &st, WNOHANG) == emb->server_pid) {
      emb->server_pid = 0;
      return ec_exited(emb, 0, st, err, errlen);
    }
    if (waitpid(emb->exec_pid, &st, WNOHANG) == emb->exec_pid) {
      emb->exec_pid = 0;
      return ec_exited(emb, 1, st, err, errlen);
    }
    if (ec_executor_ready(c)) return KA_OK;
    usleep(100000);
  }
  char line[400];
  ec_tails_line(emb->tails, 1, line, sizeof line);
  if (line[0])
    return ka_seterr(err, errlen, KA_ETIMEDOUT,
                     "no executor registered within 60 s; gpuexec's last line: %s (run with "
                     "--verbose for its whole output)",
                     line);
  return ka_seterr(err, errlen, KA_ETIMEDOUT,
                   "no executor registered within 60 s (run with --verbose)");
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
  char tok_path[300], tok[49];
  snprintf(tok_path, sizeof tok_path, "%s/admin.token", emb->state);
  ec_admin_token(tok_path, tok);
  char *sargv[] = {
      srv,        "--listen",    emb->url,         "--exec-listen",
      exec_url,   "--tasks",     (char *)o->tasks, "--state",
      emb->state, "--max-steps", "1000",           tok[0] ? "--admin-token-file" : NULL,
      tok_path,   NULL};
  char *gargv[] = {gx,
                   "--server",
                   exec_url,
                   "--tasks",
                   (char *)o->tasks,
                   "--backends",
                   (char *)(o->backends ? o->backends : "auto"),
                   o->verbose ? "--verbose" : NULL,
                   NULL};
  int rc = ec_spawn_both(emb, sargv, gargv, o->verbose, err, errlen);
  if (rc) return rc;
  ka_client *c;
  if (ka_client_open(emb->url, &c, err, errlen)) {
    ec_embedded_stop(emb, 0);
    return KA_EUNAVAIL;
  }
  rc = ec_wait_ready(emb, c, err, errlen);
  ka_client_close(c);
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
  ec_tails_free(emb->tails);
  emb->tails = NULL;
  if (!keep && emb->state[0]) ka_rmtree(emb->state);
}
