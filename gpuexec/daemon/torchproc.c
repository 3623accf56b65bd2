/* The trusted PyTorch process (torchproc.h): its start, the line protocol, the files a
 * reference travels through. */
#include "torchproc.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ka_common.h"

#define TP_LINE_MAX (1 << 20) /* a reply longer than this is not the protocol's */
#define TP_LOG_TAIL 1500      /* bytes of the process's stderr quoted in an error */

struct ka_torch {
  pid_t pid;
  int in, out;        /* our ends: requests to its stdin, replies from its stdout */
  double timeout_s;   /* per reply */
  char dir[PATH_MAX]; /* private folder: stderr log, reference files */
  ka_sb buf;          /* bytes read past the last reply */
  const ka_task *task;
  const ka_case *cs;
};

/* ---- the process ---------------------------------------------------------------- */

/* The end of the process's stderr log, for an error (static buffer). */
static const char *tp_log_tail(const ka_torch *tp) {
  static __thread char tail[TP_LOG_TAIL + 1];
  char path[PATH_MAX + 16], *log = NULL;
  size_t len = 0;
  snprintf(path, sizeof path, "%s/stderr.log", tp->dir);
  tail[0] = '\0';
  if (ka_read_file(path, 0, &log, &len) == KA_OK && len) {
    const char *p = len > TP_LOG_TAIL ? log + len - TP_LOG_TAIL : log;
    snprintf(tail, sizeof tail, "%s", p);
  }
  free(log);
  return tail[0] ? tail : "(nothing on stderr)";
}

/* Kills and reaps the process (idempotent). */
static void tp_kill(ka_torch *tp) {
  if (tp->pid > 0) {
    kill(tp->pid, SIGKILL);
    while (waitpid(tp->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    tp->pid = -1;
  }
}

/* In the child: stdin, stdout and stderr from the pipes and the log, the lock as fds 3
 * and 4, then exec. Never returns. */
static void tp_child(const char *python, const char *script, int rd, int wr, const char *log,
                     int lock_m, int lock_t) {
  int lf = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (dup2(rd, 0) < 0 || dup2(wr, 1) < 0 || lf < 0 || dup2(lf, 2) < 0) _exit(126);
  char *argv[5] = {(char *)python, (char *)script, NULL, NULL, NULL};
  if (lock_m >= 0 && lock_t >= 0) {
    /* through fds above both targets, so that dup2 cannot clobber one with the other */
    int m = fcntl(lock_m, F_DUPFD, 10), t = fcntl(lock_t, F_DUPFD, 10);
    if (m < 0 || t < 0 || dup2(m, 3) < 0 || dup2(t, 4) < 0) _exit(126);
    argv[2] = "--lock-fds";
    argv[3] = "3,4";
  }
  execvp(python, argv);
  _exit(127);
}

/* Forks the process with its pipes; tp->pid, in, out set. */
static int tp_spawn(ka_torch *tp, const char *python, const char *script, int lock_m, int lock_t,
                    char *err, size_t errlen) {
  int to[2], from[2];
  if (pipe2(to, O_CLOEXEC) != 0)
    return ka_seterr(err, errlen, KA_ESYS, "pipe: %s", strerror(errno));
  if (pipe2(from, O_CLOEXEC) != 0) {
    close(to[0]), close(to[1]);
    return ka_seterr(err, errlen, KA_ESYS, "pipe: %s", strerror(errno));
  }
  char log[PATH_MAX + 16];
  snprintf(log, sizeof log, "%s/stderr.log", tp->dir);
  pid_t pid = fork();
  if (pid == 0) tp_child(python, script, to[0], from[1], log, lock_m, lock_t);
  int e = errno;
  close(to[0]), close(from[1]);
  if (pid < 0) {
    close(to[1]), close(from[0]);
    return ka_seterr(err, errlen, KA_ESYS, "fork: %s", strerror(e));
  }
  tp->pid = pid, tp->in = to[1], tp->out = from[0];
  return KA_OK;
}

/* After the process ended unasked: why, as an error (the process reaped). */
static int tp_exited(ka_torch *tp, char *err, size_t errlen) {
  int st = 0;
  pid_t r;
  while ((r = waitpid(tp->pid, &st, 0)) < 0 && errno == EINTR) {
  }
  tp->pid = -1;
  if (r > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 127)
    return ka_seterr(err, errlen, KA_EUNAVAIL, "the torch process's Python cannot be run");
  if (r > 0 && WIFSIGNALED(st))
    return ka_seterr(err, errlen, KA_EIO, "the torch process was killed by signal %d: %s",
                     WTERMSIG(st), tp_log_tail(tp));
  return ka_seterr(err, errlen, KA_EIO, "the torch process exited (status %d): %s",
                   r > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1, tp_log_tail(tp));
}

/* ---- the protocol --------------------------------------------------------------- */

/* Sends req (one line; req is not stolen). */
static int tp_send(ka_torch *tp, json_t *req, char *err, size_t errlen) {
  char *s = json_dumps(req, JSON_COMPACT);
  if (!s) return ka_seterr(err, errlen, KA_ENOMEM, "encoding a request%s", "");
  size_t n = strlen(s);
  s[n] = '\n'; /* json_dumps leaves room for its NUL, which the newline replaces */
  int rc = KA_OK;
  for (size_t off = 0; off < n + 1 && rc == KA_OK;) {
    ssize_t w = write(tp->in, s + off, n + 1 - off);
    if (w > 0)
      off += (size_t)w;
    else if (w < 0 && errno != EINTR)
      rc = KA_EIO;
  }
  free(s);
  return rc ? tp_exited(tp, err, errlen) : KA_OK;
}

/* One reply line (caller frees *line), within tp->timeout_s. */
static int tp_read_line(ka_torch *tp, char **line, char *err, size_t errlen) {
  double deadline = ka_now_s() + tp->timeout_s;
  for (;;) {
    char *nl = tp->buf.s ? memchr(tp->buf.s, '\n', tp->buf.len) : NULL;
    if (nl) {
      size_t n = (size_t)(nl - tp->buf.s);
      *line = strndup(tp->buf.s, n);
      memmove(tp->buf.s, nl + 1, tp->buf.len - n - 1);
      tp->buf.len -= n + 1;
      tp->buf.s[tp->buf.len] = '\0';
      return *line ? KA_OK : KA_ENOMEM;
    }
    if (tp->buf.len > TP_LINE_MAX)
      return ka_seterr(err, errlen, KA_EPARSE,
                       "the torch process wrote %zu bytes without a newline", tp->buf.len);
    double left = deadline - ka_now_s();
    if (left <= 0) {
      tp_kill(tp);
      return ka_seterr(err, errlen, KA_ETIMEDOUT, "the torch process gave no reply in %.0f s",
                       tp->timeout_s);
    }
    struct pollfd p = {.fd = tp->out, .events = POLLIN};
    int pr = poll(&p, 1, (int)(left * 1000) + 1);
    if (pr < 0 && errno != EINTR)
      return ka_seterr(err, errlen, KA_ESYS, "poll: %s", strerror(errno));
    if (pr <= 0) continue;
    char chunk[4096];
    ssize_t r = read(tp->out, chunk, sizeof chunk);
    if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) return tp_exited(tp, err, errlen);
    if (r > 0) ka_sb_append(&tp->buf, chunk, (size_t)r);
    if (tp->buf.oom) return KA_ENOMEM;
  }
}

/* The error of a refused reply: its code mapped onto ours. */
static int tp_refused(json_t *rep, char *err, size_t errlen) {
  const char *code = json_string_value(json_object_get(rep, "code"));
  const char *msg = json_string_value(json_object_get(rep, "error"));
  int rc = KA_EINTERNAL;
  if (code && !strcmp(code, "unavailable"))
    rc = KA_EUNAVAIL;
  else if (code && !strcmp(code, "invalid"))
    rc = KA_EINVAL;
  else if (code && !strcmp(code, "device"))
    rc = KA_EDEVICE;
  return ka_seterr(err, errlen, rc, "torch process: %s", msg ? msg : "(no message)");
}

/* Sends req (stolen) and reads its reply: KA_OK with *rep (caller decrefs) when ok. */
static int tp_call(ka_torch *tp, json_t *req, json_t **rep, char *err, size_t errlen) {
  *rep = NULL;
  if (!req) return ka_seterr(err, errlen, KA_ENOMEM, "building a request%s", "");
  if (tp->pid <= 0) {
    json_decref(req);
    return ka_seterr(err, errlen, KA_ESTATE, "the torch process is not running%s", "");
  }
  int rc = tp_send(tp, req, err, errlen);
  json_decref(req);
  char *line = NULL;
  if (rc == KA_OK) rc = tp_read_line(tp, &line, err, errlen);
  if (rc) return rc;
  json_error_t je;
  json_t *r = json_loads(line, 0, &je);
  int ok = r && json_is_object(r) && json_is_boolean(json_object_get(r, "ok"));
  if (!ok) {
    rc = ka_seterr(err, errlen, KA_EPARSE, "the torch process replied '%.120s', not the protocol's",
                   line);
    tp_kill(tp);
  } else if (!json_is_true(json_object_get(r, "ok"))) {
    rc = tp_refused(r, err, errlen);
  }
  free(line);
  if (rc == KA_OK)
    *rep = r;
  else
    json_decref(r);
  return rc;
}

static void tp_copy(char *dst, size_t n, json_t *rep, const char *key) {
  const char *s = json_string_value(json_object_get(rep, key));
  snprintf(dst, n, "%s", s ? s : "");
}

int ka_torch_start(const char *python, const char *script, const char *device, int lock_m,
                   int lock_t, double timeout_s, ka_torch **out, ka_torch_info *info, char *err,
                   size_t errlen) {
  *out = NULL;
  if (!python || !script || timeout_s <= 0)
    return ka_seterr(err, errlen, KA_EINVAL, "ka_torch_start: python, script and a timeout%s", "");
  if (access(script, R_OK) != 0)
    return ka_seterr(err, errlen, KA_EUNAVAIL, "the torch driver %s: %s", script, strerror(errno));
  ka_torch *tp = calloc(1, sizeof *tp);
  if (!tp) return KA_ENOMEM;
  tp->pid = -1, tp->in = tp->out = -1, tp->timeout_s = timeout_s;
  const char *tmp = getenv("TMPDIR");
  snprintf(tp->dir, sizeof tp->dir, "%s/ka-torch-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(tp->dir)) {
    free(tp);
    return ka_seterr(err, errlen, KA_ESYS, "mkdtemp: %s", strerror(errno));
  }
  int rc = tp_spawn(tp, python, script, lock_m, lock_t, err, errlen);
  json_t *rep = NULL;
  if (rc == KA_OK)
    rc = tp_call(tp, json_pack("{s:s,s:s}", "op", "hello", "device", device ? device : "cuda"),
                 &rep, err, errlen);
  if (rc) {
    ka_torch_stop(tp);
    return rc;
  }
  if (info) {
    tp_copy(info->torch, sizeof info->torch, rep, "torch");
    tp_copy(info->cuda, sizeof info->cuda, rep, "cuda");
    tp_copy(info->device_name, sizeof info->device_name, rep, "device_name");
    tp_copy(info->python, sizeof info->python, rep, "python");
  }
  json_decref(rep);
  *out = tp;
  return KA_OK;
}

/* ---- requests ------------------------------------------------------------------- */

/* Tensor i of t for case c as the protocol's {name, dtype, shape, init}; NULL on error. */
static json_t *tp_tensor(const ka_task *t, int i, const ka_case *c, char *err, size_t errlen) {
  const ka_tensor_spec *ts = &t->tensors[i];
  ka_vars v = {0};
  ka_task_case_vars(t, c, &v);
  json_t *shape = json_array();
  for (int d = 0; d < ts->ndim && shape; d++) {
    int64_t n = 0;
    if (ka_expr_eval(ts->shape[d], &v, &n, err, errlen) != KA_OK) {
      json_decref(shape);
      return NULL;
    }
    json_array_append_new(shape, json_integer(n));
  }
  json_t *o = json_pack("{s:s,s:s,s:o*}", "name", ts->name, "dtype", ka_dtype_name(ts->dtype),
                        "shape", shape);
  if (o && ts->role == KA_ROLE_INPUT) {
    static const char *dist[] = {"normal", "uniform", "randint"};
    double a = 0, b = 0;
    if (ka_task_init_bounds(t, i, c, &a, &b, err, errlen) != KA_OK) {
      json_decref(o);
      return NULL;
    }
    json_object_set_new(o, "init",
                        json_pack("{s:s,s:f,s:f}", "dist", dist[ts->dist], "a", a, "b", b));
  }
  return o;
}

int ka_torch_load(ka_torch *tp, const ka_task *t, const ka_case *c, char *err, size_t errlen) {
  json_t *ins = json_array(), *outs = json_array();
  for (int i = 0; i < t->ntensors && ins && outs; i++) {
    json_t *o = tp_tensor(t, i, c, err, errlen);
    if (!o) {
      json_decref(ins), json_decref(outs);
      return KA_EPARSE;
    }
    json_array_append_new(t->tensors[i].role == KA_ROLE_INPUT ? ins : outs, o);
  }
  char model[PATH_MAX];
  snprintf(model, sizeof model, "%s/model.py", t->dir);
  json_t *rep = NULL;
  int rc = tp_call(tp,
                   json_pack("{s:s,s:s,s:o*,s:o*}", "op", "load", "model", model, "inputs", ins,
                             "outputs", outs),
                   &rep, err, errlen);
  json_decref(rep);
  if (rc == KA_OK) tp->task = t, tp->cs = c;
  return rc;
}

/* Writes input i's bytes (in<i>.bin) or reads output j's doubles (out<j>.bin). */
static int tp_file(ka_torch *tp, int input, int k, void *data, size_t bytes, char *err,
                   size_t errlen) {
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/%s%d.bin", tp->dir, input ? "in" : "out", k);
  if (input) {
    if (ka_write_file(path, data, bytes) != KA_OK)
      return ka_seterr(err, errlen, KA_EIO, "writing %s", path);
    return KA_OK;
  }
  char *buf = NULL;
  size_t len = 0;
  int rc = ka_read_file(path, bytes + 1, &buf, &len);
  if (rc == KA_OK && len == bytes) memcpy(data, buf, bytes);
  free(buf);
  unlink(path);
  if (rc != KA_OK || len != bytes)
    return ka_seterr(err, errlen, KA_EPARSE, "the torch process's output %d: %zu bytes, want %zu",
                     k, rc == KA_OK ? len : 0, bytes);
  return KA_OK;
}

int ka_torch_reference(ka_torch *tp, void *const *tensors, int *bits, char *err, size_t errlen) {
  const ka_task *t = tp->task;
  if (!t) return ka_seterr(err, errlen, KA_ESTATE, "ka_torch_reference before ka_torch_load%s", "");
  int rc = KA_OK, nin = 0, nout = 0;
  for (int i = 0; i < t->ntensors && rc == KA_OK; i++) {
    int64_t n = 0;
    rc = ka_task_tensor_elems(t, i, tp->cs, &n, err, errlen);
    if (rc == KA_OK && t->tensors[i].role == KA_ROLE_INPUT)
      rc = tp_file(tp, 1, nin++, tensors[i], (size_t)n * ka_dtype_size(t->tensors[i].dtype), err,
                   errlen);
  }
  json_t *rep = NULL;
  if (rc == KA_OK)
    rc = tp_call(tp, json_pack("{s:s,s:s}", "op", "reference", "dir", tp->dir), &rep, err, errlen);
  for (int i = 0; i < t->ntensors && rc == KA_OK; i++) {
    int64_t n = 0;
    if (t->tensors[i].role == KA_ROLE_INPUT) continue;
    rc = ka_task_tensor_elems(t, i, tp->cs, &n, err, errlen);
    if (rc == KA_OK)
      rc = tp_file(tp, 0, nout++, tensors[i], (size_t)n * sizeof(double), err, errlen);
  }
  for (int i = 0; i < nin; i++) { /* the inputs never outlive the request */
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/in%d.bin", tp->dir, i);
    unlink(path);
  }
  if (rc == KA_OK && bits) {
    const char *p = json_string_value(json_object_get(rep, "precision"));
    *bits = p && !strcmp(p, "float32") ? 32 : 64;
  }
  json_decref(rep);
  return rc;
}

int ka_torch_time(ka_torch *tp, const char *mode, int calls, int warmup, uint64_t seed, double *ms,
                  double *compile_s, char *err, size_t errlen) {
  if (!tp->task)
    return ka_seterr(err, errlen, KA_ESTATE, "ka_torch_time before ka_torch_load%s", "");
  json_t *rep = NULL;
  int rc = tp_call(tp,
                   json_pack("{s:s,s:s,s:i,s:i,s:I}", "op", "time", "mode", mode, "calls", calls,
                             "warmup", warmup, "seed", (json_int_t)(seed & 0x7fffffffffffffffULL)),
                   &rep, err, errlen);
  if (rc) return rc;
  json_t *a = json_object_get(rep, "ms");
  int got = json_is_array(a) ? (int)json_array_size(a) : -1;
  if (got != calls) {
    json_decref(rep);
    return ka_seterr(err, errlen, KA_EPARSE, "the torch process's times: %d, want %d", got, calls);
  }
  for (int i = 0; i < calls; i++) {
    ms[i] = json_number_value(json_array_get(a, (size_t)i));
    if (!(ms[i] > 0))
      rc = ka_seterr(err, errlen, KA_EPARSE, "the torch process's time %d: %g", i, ms[i]);
  }
  if (compile_s) *compile_s = json_number_value(json_object_get(rep, "compile_s"));
  json_decref(rep);
  return rc;
}

void ka_torch_stop(ka_torch *tp) {
  if (!tp) return;
  if (tp->pid > 0 && tp->in >= 0) {
    static const char quit[] = "{\"op\":\"quit\"}\n";
    ssize_t w = write(tp->in, quit, sizeof quit - 1);
    (void)w;
    close(tp->in), tp->in = -1; /* end of input: the process ends too */
    for (int i = 0; i < 100 && tp->pid > 0; i++) {
      pid_t r = waitpid(tp->pid, NULL, WNOHANG);
      if (r == tp->pid || (r < 0 && errno != EINTR))
        tp->pid = -1;
      else
        usleep(10000);
    }
  }
  tp_kill(tp);
  if (tp->in >= 0) close(tp->in);
  if (tp->out >= 0) close(tp->out);
  ka_sb_free(&tp->buf);
  ka_rmtree(tp->dir);
  free(tp);
}
