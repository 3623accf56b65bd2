/* gpuexec: the executor daemon.
 *
 * Discovers the devices of each backend (through `ka-runner --discover`, so this
 * process never loads a vendor library), starts one worker thread per evaluation slot
 * (--jobs-per-device per GPU device, one on the host backend unless given), and
 * each worker long-polls the envserver's executor socket for jobs (pull model: an
 * executor dials the server, so executors on other hosts work the same way). */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "command.h"
#include "gpuexec.h"
#include "sandbox.h"
#include "triton.h"
#include "refcache.h"
#include "ka_common.h"
#include "ka_opt.h"
#include "ka_tls.h"

#define GX_POLL_WAIT_MS 5000
/* How long a send waits for a connection before the socket is dialled again. */
#define GX_SEND_MS 3000
/* default --adaptive-reps: timed calls up to 10x the job's reps while the estimate is
 * unstable (runner_case.c RN_RSE_TARGET) */
#define GX_ADAPTIVE_REPS 10
/* --ref-cache-mb when the machine's memory is unknown (refcache.h): gelu's two cases
 * hold about 0.6 GiB a seed */
#define GX_REF_CACHE_MB 4096
/* default --ref-cache-mb: this share of the machine's physical memory, at least
 * GX_REF_CACHE_MIN_MB. One entry per (task, case, input seed) in flight: on the H200
 * 16 gelu episodes each with its own seed ran at 1.52 steps/s with 4096 MiB (references
 * evicted and recomputed, 1.3-2.5 s of host work each) and 2.44 with 32768
 * (docs/benchmarks/2026-12-03-session22-h200.md) */
#define GX_REF_CACHE_SHARE 4
#define GX_REF_CACHE_MIN_MB 1024
/* default --jobs-per-device: evaluations in flight per GPU; their compiles, staging,
 * checks and judging overlap while timed calls stay alone on the device (devlock.h) */
#define GX_JOBS_PER_DEVICE 4
#define GX_MAX_JOBS_PER_DEVICE 32
/* default --timed-budget-ms: wall time of one case's timed calls after which adaptive
 * repetition stops (runner_case.c RN_TIMED_BUDGET_S explains the figure) */
#define GX_TIMED_BUDGET_MS 300
/* default --call-limit: seconds one call of the candidate may hold a shared GPU */
#define GX_CALL_LIMIT_S 10.0
#define GX_HEARTBEAT_S                                      \
  3.0 /* default --heartbeat-interval; the server's default \
         --heartbeat-timeout is 15 s (ES_HEARTBEAT_LOST_S) */

/* The heartbeat state of one worker: the job it evaluates (job_id[0] == 0: none). The
 * worker thread sets and clears the job; its heartbeat thread reads it. */
typedef struct gx_heartbeat {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  char job_id[256];
  uint32_t attempt;         /* its Job.attempt (the dispatch token), sent back */
  unsigned long generation; /* bumped at every job start, so a job is told apart from the
                               next one with the same id */
} gx_heartbeat;

typedef struct gx_worker {
  pthread_t thread, hb_thread;
  const ka_exec_config *cfg;
  Kernelarena__V1__Device *dev;
  char id[256];
  double hb_interval_s; /* 0: no heartbeats */
  gx_heartbeat hb;
} gx_worker;

static atomic_int gx_stop;

static void gx_on_signal(int sig) {
  atomic_store(&gx_stop, sig);
}

/* Frees what main made before its workers started, for an exit at startup (so that a
 * sanitizer build's leak report does not become the last line of the error). */
static void gx_free_early(ka_registry *reg, ka_exec_config *cfg, gx_worker *workers, int nworkers) {
  for (int i = 0; i < nworkers; i++) ka_device_free(workers[i].dev);
  free(workers);
  ka_refcache_free(cfg->ref_cache);
  ka_registry_free(reg);
}

/* Runs `ka-runner --discover backend` and decodes the devices it lists. */
static int gx_discover(const char *runner, const char *backend,
                       Kernelarena__V1__DescribeResponse **out, char *err, size_t errlen) {
  *out = NULL;
  int po[2], pe[2];
  if (pipe(po) || pipe(pe)) return ka_seterr(err, errlen, KA_ESYS, "pipe");
  pid_t pid = fork();
  if (pid < 0) return ka_seterr(err, errlen, KA_ESYS, "fork");
  if (pid == 0) {
    dup2(po[1], 1);
    dup2(pe[1], 2);
    close(po[0]), close(pe[0]), close(po[1]), close(pe[1]);
    execl(runner, runner, "--discover", backend, (char *)NULL);
    _exit(127);
  }
  close(po[1]);
  close(pe[1]);
  ka_sb o = {0}, e = {0};
  char buf[4096];
  ssize_t n;
  while ((n = read(po[0], buf, sizeof buf)) > 0) ka_sb_append(&o, buf, (size_t)n);
  while ((n = read(pe[0], buf, sizeof buf)) > 0) ka_sb_append(&e, buf, (size_t)n);
  close(po[0]);
  close(pe[0]);
  int st;
  waitpid(pid, &st, 0);
  int rc = KA_OK;
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    rc = ka_seterr(err, errlen, KA_EUNAVAIL, "device discovery failed: %s", e.s ? e.s : "");
  } else {
    *out = kernelarena__v1__describe_response__unpack(NULL, o.len, (uint8_t *)(o.s ? o.s : ""));
    if (!*out)
      rc = ka_seterr(err, errlen, KA_EPARSE, "bad discovery output");
    else if ((*out)->n_devices == 0)
      ka_seterr(err, errlen, KA_OK, "%s", e.s ? e.s : "no devices");
  }
  if (e.s) {
    size_t l = strlen(e.s);
    while (l && e.s[l - 1] == '\n') e.s[--l] = 0;
  }
  if (rc == KA_OK && (*out)->n_devices == 0 && e.s) ka_seterr(err, errlen, KA_OK, "%s", e.s);
  ka_sb_free(&o);
  ka_sb_free(&e);
  return rc;
}

/* TLS of the dial (--tls-ca, --tls-cert, --tls-key, --tls-server-name), set once in main
 * before any worker starts, read-only afterwards. */
static ka_tls_files gx_tls;
static const char *gx_tls_server_name;

/* Creates the dialer of sock to url, with TLS for a tls+tcp:// URL (ka_tls.h); nng's
 * error, or NNG_EINVAL with the reason in err for a TLS configuration that cannot work. */
static int gx_dialer(nng_socket sock, const char *url, nng_dialer *d, char *err, size_t errlen) {
  int rv = nng_dialer_create(d, sock, url);
  if (rv == 0 && ka_url_is_tls(url) &&
      ka_tls_dialer_setup(*d, url, &gx_tls, gx_tls_server_name, err, errlen) != KA_OK)
    rv = NNG_EINVAL;
  return rv;
}

/* Opens a REQ socket dialled to url with the executor's options; recv_ms bounds a reply. */
static int gx_open(nng_socket *sock, const char *url, int recv_ms) {
  int rv = nng_req0_open(sock);
  if (rv) return rv;
  /* The REQ resend timer would evaluate a job twice; turn it off. */
  nng_socket_set_ms(*sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
  nng_socket_set_ms(*sock, NNG_OPT_RECVTIMEO, recv_ms);
  nng_socket_set_ms(*sock, NNG_OPT_SENDTIMEO, GX_SEND_MS);
  nng_socket_set_size(*sock, NNG_OPT_RECVMAXSZ, 256u << 20);
  nng_socket_set_ms(*sock, NNG_OPT_RECONNMINT, 100);
  nng_socket_set_ms(*sock, NNG_OPT_RECONNMAXT, 2000);
  nng_dialer d;
  char why[512] = "";
  if ((rv = gx_dialer(*sock, url, &d, why, sizeof why)) == 0)
    rv = nng_dialer_start(d, NNG_FLAG_NONBLOCK);
  if (rv) nng_close(*sock);
  return rv;
}

/* Checks at start that url can be dialled as configured (a tls+tcp:// URL needs --tls-ca;
 * --tls-cert and --tls-key go together; the files must load): 0, or -1 with the reason
 * printed. Dials nothing. */
static int gx_dial_check(const char *url) {
  nng_socket sock;
  nng_dialer d;
  char why[512] = "";
  if (nng_req0_open(&sock)) return -1;
  int rv = gx_dialer(sock, url, &d, why, sizeof why);
  nng_close(sock);
  if (rv) fprintf(stderr, "gpuexec: --server %s: %s\n", url, *why ? why : nng_strerror(rv));
  return rv ? -1 : 0;
}

/* After a failed exchange (no pipe within the send timeout, no reply), closes the socket
 * and dials again with a fresh one. nng's dialer redials by itself, but a worker whose
 * socket still had no pipe 13 s after a server restart was seen in CI (nng 1.5.2,
 * python_faults_restart), so a failure is never waited out on the same socket. Returns
 * 0, or nng's error with *sock closed (the caller retries later). */
static int gx_reopen(nng_socket *sock, const char *url, int recv_ms) {
  nng_close(*sock);
  return gx_open(sock, url, recv_ms);
}

/* Sends one WorkerHeartbeat and waits for its HeartbeatAck. Returns 1 if the server still
 * wants the job, 0 if not, -1 if no valid answer came. */
static int gx_send_heartbeat(nng_socket sock, const char *worker_id, const char *job_id,
                             uint32_t attempt, uint64_t reqid) {
  Kernelarena__V1__ExecRequest req = KERNELARENA__V1__EXEC_REQUEST__INIT;
  Kernelarena__V1__WorkerHeartbeat hb = KERNELARENA__V1__WORKER_HEARTBEAT__INIT;
  hb.worker_id = (char *)worker_id;
  hb.job_id = (char *)job_id;
  hb.attempt = attempt;
  req.request_id = reqid;
  req.body_case = KERNELARENA__V1__EXEC_REQUEST__BODY_HEARTBEAT;
  req.heartbeat = &hb;
  nng_msg *msg;
  if (nng_msg_alloc(&msg, kernelarena__v1__exec_request__get_packed_size(&req))) return -1;
  kernelarena__v1__exec_request__pack(&req, nng_msg_body(msg));
  if (nng_sendmsg(sock, msg, 0)) {
    nng_msg_free(msg);
    return -1;
  }
  nng_msg *reply;
  if (nng_recvmsg(sock, &reply, 0)) return -1;
  Kernelarena__V1__ExecResponse *resp =
      kernelarena__v1__exec_response__unpack(NULL, nng_msg_len(reply), nng_msg_body(reply));
  nng_msg_free(reply);
  int wanted = -1;
  if (resp && resp->body_case == KERNELARENA__V1__EXEC_RESPONSE__BODY_HEARTBEAT)
    wanted = resp->heartbeat->job_wanted ? 1 : 0;
  if (resp) kernelarena__v1__exec_response__free_unpacked(resp, NULL);
  return wanted;
}

/* The heartbeat thread of one worker: while the worker evaluates a job, sends a
 * WorkerHeartbeat at once and then every hb_interval_s on its own socket, so that the
 * server finds a dead worker within its --heartbeat-timeout and a live long job is not
 * declared lost. A HeartbeatAck with job_wanted = false is logged; the evaluation runs
 * on to its own deadline (its result is then dropped by the server). */
static void *gx_heartbeat_main(void *arg) {
  gx_worker *w = arg;
  nng_socket sock;
  int rv = gx_open(&sock, w->cfg->server_url, 10000);
  if (rv) {
    fprintf(stderr, "gpuexec: %s: heartbeat socket: %s\n", w->id, nng_strerror(rv));
    return NULL;
  }
  uint64_t reqid = 0;
  unsigned long told = 0; /* generation already told "not wanted" */
  int lost = 0;           /* failed dials in a row */
  pthread_mutex_lock(&w->hb.mu);
  while (!atomic_load(&gx_stop)) {
    if (!w->hb.job_id[0]) {
      pthread_cond_wait(&w->hb.cv, &w->hb.mu);
      continue;
    }
    char job_id[256];
    snprintf(job_id, sizeof job_id, "%s", w->hb.job_id);
    unsigned long gen = w->hb.generation;
    uint32_t attempt = w->hb.attempt;
    pthread_mutex_unlock(&w->hb.mu);
    int wanted = gx_send_heartbeat(sock, w->id, job_id, attempt, ++reqid);
    /* no answer: a fresh socket for the next one (kept trying every interval: the polls
     * still tell the server that this worker sends heartbeats) */
    if (wanted < 0 && gx_reopen(&sock, w->cfg->server_url, 10000) && !lost++)
      fprintf(stderr, "gpuexec: %s: heartbeat socket: cannot dial again; retrying\n", w->id);
    if (wanted >= 0) lost = 0;
    if (wanted == 0 && told != gen) {
      told = gen;
      fprintf(stderr, "gpuexec: %s: the server no longer wants job %s\n", w->id, job_id);
    } else if (wanted < 0 && w->cfg->verbose) {
      fprintf(stderr, "gpuexec: %s: heartbeat for job %s unanswered\n", w->id, job_id);
    }
    pthread_mutex_lock(&w->hb.mu);
    /* sleep one interval, or until this job ends */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    double t = (double)until.tv_sec + until.tv_nsec * 1e-9 + w->hb_interval_s;
    until.tv_sec = (time_t)t;
    until.tv_nsec = (long)((t - (double)until.tv_sec) * 1e9);
    while (!atomic_load(&gx_stop) && w->hb.job_id[0] && w->hb.generation == gen) {
      if (pthread_cond_timedwait(&w->hb.cv, &w->hb.mu, &until) == ETIMEDOUT) break;
    }
  }
  pthread_mutex_unlock(&w->hb.mu);
  nng_close(sock);
  return NULL;
}

/* Tells the heartbeat thread that the worker started (job_id, dispatch attempt) or ended
 * (NULL) a job. */
static void gx_heartbeat_set(gx_worker *w, const char *job_id, uint32_t attempt) {
  if (w->hb_interval_s <= 0) return;
  pthread_mutex_lock(&w->hb.mu);
  snprintf(w->hb.job_id, sizeof w->hb.job_id, "%s", job_id ? job_id : "");
  w->hb.attempt = attempt;
  if (job_id) w->hb.generation++;
  pthread_cond_broadcast(&w->hb.cv);
  pthread_mutex_unlock(&w->hb.mu);
}

/* The worker's socket after a failed exchange: a fresh one (gx_reopen), dialled again
 * each second until it opens or gpuexec stops. Returns 0 with *sock open, -1 on stop. */
static int gx_worker_redial(gx_worker *w, nng_socket *sock) {
  for (;;) {
    sleep(1);
    if (atomic_load(&gx_stop)) {
      nng_close(*sock);
      return -1;
    }
    int rv = gx_reopen(sock, w->cfg->server_url, GX_POLL_WAIT_MS + 30000);
    if (rv == 0) return 0;
    fprintf(stderr, "gpuexec: %s: dial %s: %s\n", w->id, w->cfg->server_url, nng_strerror(rv));
    *sock = (nng_socket)NNG_SOCKET_INITIALIZER;
  }
}

/* The proto name of a Status ("OK", "COMPILE_ERROR", ...), "?" for an unknown value. */
static const char *gx_status_name(int status) {
  const ProtobufCEnumValue *v =
      protobuf_c_enum_descriptor_get_value(&kernelarena__v1__status__descriptor, status);
  return v ? v->name : "?";
}

#define GX_INFRA_TAIL 4000

/* Writes text to stderr, each line after prefix, control characters (C0 and DEL) as '?':
 * a command's own output cannot pass for a line of gpuexec's (red team 2026-12-02). */
static void gx_put_marked(const char *prefix, const char *text) {
  int bol = 1;
  for (const char *p = text; *p; p++) {
    if (bol) fputs(prefix, stderr);
    unsigned char c = (unsigned char)*p;
    fputc(c == '\n' || c == '\t' || (c >= 0x20 && c != 0x7f) ? c : '?', stderr);
    bol = c == '\n';
  }
  if (!bol) fputc('\n', stderr);
}

/* An INFRA_ERROR is the executor's fault, never the submission's, and the client sees
 * only its message: the operator gets it on stderr, with --verbose also the last
 * GX_INFRA_TAIL bytes of the job's log (a command task's baseline pass, say), so that
 * the cause can be found without the episode's trace. */
static void gx_log_infra(const gx_worker *w, const char *job_id, const Kernelarena__V1__Result *r) {
  fprintf(stderr, "gpuexec: %s: job %s: INFRA_ERROR: ", w->id, job_id);
  gx_put_marked("", r->message && r->message[0] ? r->message : "(no message)");
  if (!w->cfg->verbose || !r->runtime_log || !r->runtime_log[0]) return;
  size_t n = strlen(r->runtime_log);
  const char *tail = n > GX_INFRA_TAIL ? r->runtime_log + n - GX_INFRA_TAIL : r->runtime_log;
  fprintf(stderr, "gpuexec: %s: job %s: the end of its log:\n", w->id, job_id);
  gx_put_marked("  | ", tail);
}

static void *gx_worker_main(void *arg) {
  gx_worker *w = arg;
  nng_socket sock;
  int rv = gx_open(&sock, w->cfg->server_url, GX_POLL_WAIT_MS + 30000);
  if (rv) {
    fprintf(stderr, "gpuexec: %s: dial %s: %s\n", w->id, w->cfg->server_url, nng_strerror(rv));
    return NULL;
  }
  if (w->hb_interval_s > 0 && pthread_create(&w->hb_thread, NULL, gx_heartbeat_main, w)) {
    fprintf(stderr, "gpuexec: %s: no heartbeat thread; the server's slow loss rule applies\n",
            w->id);
    w->hb_interval_s = 0;
  }
  ka_pool_warm(w->cfg, w->dev); /* the first job's runner, its device open */
  Kernelarena__V1__Result pending = KERNELARENA__V1__RESULT__INIT;
  int have_pending = 0, warned = 0;
  uint64_t reqid = 0;
  while (!atomic_load(&gx_stop)) {
    Kernelarena__V1__ExecRequest req = KERNELARENA__V1__EXEC_REQUEST__INIT;
    Kernelarena__V1__WorkerPoll poll = KERNELARENA__V1__WORKER_POLL__INIT;
    poll.worker_id = w->id;
    poll.device = w->dev;
    poll.wait_ms = GX_POLL_WAIT_MS;
    poll.heartbeats = w->hb_interval_s > 0;
    poll.prefetch = !w->cfg->no_prefetch;
    if (have_pending) poll.result = &pending;
    req.request_id = ++reqid;
    req.body_case = KERNELARENA__V1__EXEC_REQUEST__BODY_POLL;
    req.poll = &poll;
    size_t len = kernelarena__v1__exec_request__get_packed_size(&req);
    nng_msg *msg;
    if (nng_msg_alloc(&msg, len)) {
      sleep(1);
      continue;
    }
    kernelarena__v1__exec_request__pack(&req, nng_msg_body(msg));
    if ((rv = nng_sendmsg(sock, msg, 0)) != 0) {
      nng_msg_free(msg);
      if (!warned++)
        fprintf(stderr, "gpuexec: %s: cannot reach %s (%s%s); retrying\n", w->id,
                w->cfg->server_url, nng_strerror(rv),
                ka_url_is_tls(w->cfg->server_url)
                    ? "; over TLS a certificate either side refuses looks the same: check "
                      "--tls-ca, --tls-cert and --tls-key"
                    : "");
      if (gx_worker_redial(w, &sock)) break;
      continue;
    }
    /* the result is on its way: the evaluation's buffers are freed and the next runner
     * started while the server records it */
    ka_evaluate_finish(w->cfg);
    nng_msg *reply;
    if ((rv = nng_recvmsg(sock, &reply, 0)) != 0) {
      if (!warned++)
        fprintf(stderr, "gpuexec: %s: no answer from %s (%s); retrying\n", w->id,
                w->cfg->server_url, nng_strerror(rv));
      if (gx_worker_redial(w, &sock)) break;
      continue;
    }
    if (warned) fprintf(stderr, "gpuexec: %s: connected to %s\n", w->id, w->cfg->server_url);
    warned = 0;
    Kernelarena__V1__ExecResponse *resp =
        kernelarena__v1__exec_response__unpack(NULL, nng_msg_len(reply), nng_msg_body(reply));
    nng_msg_free(reply);
    if (!resp) {
      fprintf(stderr, "gpuexec: %s: malformed reply\n", w->id);
      sleep(1);
      continue;
    }
    if (resp->body_case == KERNELARENA__V1__EXEC_RESPONSE__BODY_ERROR) {
      fprintf(stderr, "gpuexec: %s: server error: %s\n", w->id,
              resp->error->message ? resp->error->message : "");
      kernelarena__v1__exec_response__free_unpacked(resp, NULL);
      sleep(1);
      continue;
    }
    /* the server has our result now */
    if (have_pending) ka_result_clear(&pending);
    have_pending = 0;
    if (resp->body_case == KERNELARENA__V1__EXEC_RESPONSE__BODY_ASSIGNMENT &&
        resp->assignment->job) {
      const Kernelarena__V1__Job *job = resp->assignment->job;
      if (job->prefetch) { /* no result, no heartbeat: the prefetch thread runs it */
        ka_prefetch_queue(w->cfg, job);
        kernelarena__v1__exec_response__free_unpacked(resp, NULL);
        continue;
      }
      if (w->cfg->verbose)
        fprintf(stderr, "gpuexec: %s: job %s (%s)\n", w->id, job->job_id, job->task_id);
      gx_heartbeat_set(w, job->job_id, job->attempt);
      ka_prefetch_supersede(w->cfg, job); /* it draws the same entries itself */
      ka_evaluate(w->cfg, w->dev, job, &pending);
      gx_heartbeat_set(w, NULL, 0);
      pending.attempt = job->attempt; /* the dispatch this result answers */
      have_pending = 1;
      if (w->cfg->verbose)
        fprintf(stderr, "gpuexec: %s: job %s -> %s in %.2f s\n", w->id, job->job_id,
                gx_status_name(pending.status), pending.wall_s);
      if (pending.status == KERNELARENA__V1__STATUS__INFRA_ERROR)
        gx_log_infra(w, job->job_id, &pending);
    }
    kernelarena__v1__exec_response__free_unpacked(resp, NULL);
  }
  if (have_pending) ka_result_clear(&pending);
  ka_evaluate_finish(w->cfg);
  nng_close(sock);
  return NULL;
}

/* Evaluation folders: each gpuexec keeps its ka-eval-* folders under
 * $TMPDIR/ka-gpuexec-<pid>, named by its pid, so that it removes them on SIGTERM and a
 * later gpuexec removes those of a process that died (kill -9, OOM) at start. Only
 * folders of this user whose pid is not alive are removed. */
#define GX_OWN_PREFIX "ka-gpuexec-"

static void gx_reap_stale(const char *tmp) {
  DIR *d = opendir(tmp);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, GX_OWN_PREFIX, strlen(GX_OWN_PREFIX))) continue;
    char *end;
    long pid = strtol(e->d_name + strlen(GX_OWN_PREFIX), &end, 10);
    if (*end || pid <= 0 || pid == (long)getpid()) continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive (or not ours) */
    char path[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", tmp, e->d_name);
    if (lstat(path, &st) || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) continue;
    if (ka_rmtree(path) == KA_OK)
      fprintf(stderr, "gpuexec: removed %s (left by gpuexec %ld, which is gone)\n", path, pid);
  }
  closedir(d);
}

/* Hides, from every sandbox domain that runs submitted code, the folders that hold what
 * a submission must not read (ka_sandbox_hide): the tasks (hidden baselines, reference.c,
 * held-out cases: readable otherwise where the tasks are installed under /usr, /opt or
 * a venv of --command-path), the compile cache and the triton cache (baselines' builds).
 * Before any thread starts. 0, or 1 after a line on stderr. */
static int gx_hide(const char *tasks_dir, const char *cache, const char *triton_cache) {
  const char *dirs[] = {tasks_dir, cache, triton_cache};
  for (int i = 0; i < 3; i++) {
    if (!dirs[i]) continue;
    if (i > 0) ka_mkdirs(dirs[i]); /* made now, so that it is hidden once it fills */
    int rc = ka_sandbox_hide(dirs[i]);
    if (rc) {
      fprintf(stderr, "gpuexec: cannot hide %s from the sandbox: %s\n", dirs[i], ka_strerror(rc));
      return 1;
    }
  }
  return 0;
}

/* Language triton (gpuexec/backends/triton.h): once, and only when reg holds a triton
 * task, finds and probes the Python with triton for the runners (ka_triton_setup). 1 when
 * triton is usable, else 0 after a line that says why. */
static int gx_triton(const ka_registry *reg, const char *exedir, const char *cache,
                     const char *python, const char *tcache) {
  static int state = -1;
  if (state >= 0) return state;
  state = 0;
  int any = 0;
  for (int i = 0; i < reg->ntasks; i++) any |= !strcmp(reg->tasks[i]->language, "triton");
  if (!any) return 0;
  char msg[768];
  state = ka_triton_setup(exedir, cache, python, tcache, msg, sizeof msg);
  if (state)
    fprintf(stderr, "gpuexec: language triton: %s\n", msg);
  else
    fprintf(stderr,
            "gpuexec: language triton unavailable (%s); triton tasks are refused at reset\n", msg);
  return state;
}

/* The memory limit of this process's cgroup in bytes (cgroup v2 memory.max, else v1
 * memory.limit_in_bytes, as a container sets them), or 0 when none is set or readable. */
static double gx_cgroup_limit(void) {
  static const char *const files[] = {"/sys/fs/cgroup/memory.max",
                                      "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    FILE *f = fopen(files[i], "r");
    if (!f) continue;
    double v = 0;
    int n = fscanf(f, "%lf", &v); /* "max" (no limit) reads as no number */
    fclose(f);
    if (n == 1 && v > 0) return v;
  }
  return 0;
}

/* The default --ref-cache-mb: 1/GX_REF_CACHE_SHARE of the physical memory (sysconf) or of
 * the cgroup's limit where that is lower, at least GX_REF_CACHE_MIN_MB; GX_REF_CACHE_MB
 * when the memory is unknown. */
static int gx_default_ref_cache_mb(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return GX_REF_CACHE_MB;
  double bytes = (double)pages * (double)page, limit = gx_cgroup_limit();
  if (limit > 0 && limit < bytes) bytes = limit;
  double mb = bytes / GX_REF_CACHE_SHARE / (1 << 20);
  if (mb > (double)(1L << 24)) mb = (double)(1L << 24);
  return mb < GX_REF_CACHE_MIN_MB ? GX_REF_CACHE_MIN_MB : (int)mb;
}

static void gx_usage(FILE *f) {
  fprintf(
      f,
      "usage: gpuexec [options]\n"
      "  --server URL     envserver executor URL (default ipc://var/exec.ipc)\n"
      "  --tasks DIR      task folder, the same tasks as the server (default ./tasks)\n"
      "  --backends LIST  comma-separated: host,cuda,hip or auto (default auto: every\n"
      "                   backend that finds a device)\n"
      "  --cache DIR      compiled references (default $TMPDIR/kernelarena-cache-<uid>)\n"
      "  --heartbeat-interval S  seconds between heartbeats while a job runs (default\n"
      "                   3; keep it well below the server's --heartbeat-timeout;\n"
      "                   0: none, the server then waits 2 x (timeout + 30 s))\n"
      "  --adaptive-reps F  timed calls may continue up to F x the job's reps while the\n"
      "                   speedup estimate is unstable (default %d, or KA_ADAPTIVE_REPS;\n"
      "                   1: exactly the job's reps; GPU backends only)\n"
      "  --ref-cache-mb N   memory for correctness inputs and reference outputs kept\n"
      "                   across the steps of an episode (default a quarter of this\n"
      "                   machine's memory or memory limit, here %d MiB; 0: none)\n"
      "  --no-pool        start each job's runner when the job comes (default: one\n"
      "                   runner per GPU evaluation slot is started ahead, its context open)\n"
      "  --no-prefetch    take no reference prefetches (default: an idle worker takes the\n"
      "                   one envserver queues at Reset and a low-priority thread computes\n"
      "                   the first step's inputs and references into the cache)\n"
      "  --jobs-per-device N  evaluations in flight per device (1 to %d; default %d on\n"
      "                   GPUs, 1 on the host backend unless given); timed calls still\n"
      "                   run alone on the device (docs/integrity.md)\n"
      "  --timed-budget-ms N  GPU backends: milliseconds of one case's timed phase (waits for\n"
      "                   a shared device not counted) after which adaptive repetition stops\n"
      "                   (default %d). Repetition also stops at 0.1%% standard error of the\n"
      "                   speedup or at --adaptive-reps; the job's reps are always made. Lower\n"
      "                   is faster and noisier (docs/benchmarks/2026-12-01-session15-h200.md:\n"
      "                   100 ms kept the baseline within 0.3%% of itself in 94.5%% of\n"
      "                   step-cases, 300 ms in 98%%)\n"
      "  --call-limit S   one call of the candidate on a GPU (or on a shared host) may run\n"
      "                   this many seconds (default %g; past it the step is TIMEOUT; 0: only\n"
      "                   the deadline)\n"
      "  --triton-python PATH  the Python with triton for language triton (default: the\n"
      "                   venv's, <repository>/.venv/bin/python3, if present, else python3 on\n"
      "                   PATH); without triton, triton tasks are refused at reset\n"
      "  --triton-cache DIR  the triton compile cache (default <--cache>/triton)\n"
      "  --command-path DIRS  command tasks: folders (colon-separated) before\n"
      "                   /usr/local/bin:/usr/bin:/bin on their commands' PATH, e.g. the bin\n"
      "                   of a venv with torch and triton (docs/tasks.md)\n"
      "  --command-pairs N  command tasks: score each step by the per-case medians of N\n"
      "                   pairs of performance runs, the baseline's and the candidate's\n"
      "                   alternated (1 to %d; default 1, off: the candidate's one run against\n"
      "                   the baseline's times measured once per task version)\n"
      "  --tls-ca PEM     for a tls+tcp:// --server: the CA that signed the server's\n"
      "                   certificate (required there)\n"
      "  --tls-cert PEM   this executor's certificate (the server admits executors\n"
      "                   by certificates of its --tls-ca; docs/deploy.md)\n"
      "  --tls-key PEM    its private key (unencrypted PEM)\n"
      "  --tls-server-name NAME  the name the server's certificate must carry (default:\n"
      "                   the host of --server)\n"
      "  --verbose        log every job\n",
      GX_ADAPTIVE_REPS, gx_default_ref_cache_mb(), GX_MAX_JOBS_PER_DEVICE, GX_JOBS_PER_DEVICE,
      GX_TIMED_BUDGET_MS, GX_CALL_LIMIT_S, KA_CMD_PAIRS_MAX);
}

int main(int argc, char **argv) {
  static const struct option opts[] = {{"server", required_argument, 0, 's'},
                                       {"tasks", required_argument, 0, 't'},
                                       {"backends", required_argument, 0, 'b'},
                                       {"cache", required_argument, 0, 'c'},
                                       {"verbose", no_argument, 0, 'v'},
                                       {"heartbeat-interval", required_argument, 0, 'H'},
                                       {"adaptive-reps", required_argument, 0, 'A'},
                                       {"ref-cache-mb", required_argument, 0, 'R'},
                                       {"no-pool", no_argument, 0, 'P'},
                                       {"no-prefetch", no_argument, 0, 'F'},
                                       {"jobs-per-device", required_argument, 0, 'J'},
                                       {"call-limit", required_argument, 0, 'L'},
                                       {"timed-budget-ms", required_argument, 0, 'B'},
                                       {"triton-python", required_argument, 0, 'T'},
                                       {"triton-cache", required_argument, 0, 'C'},
                                       {"command-path", required_argument, 0, 'X'},
                                       {"command-pairs", required_argument, 0, 'Q'},
                                       {"tls-ca", required_argument, 0, 'a'},
                                       {"tls-cert", required_argument, 0, 'E'},
                                       {"tls-key", required_argument, 0, 'K'},
                                       {"tls-server-name", required_argument, 0, 'N'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *server = "ipc://var/exec.ipc", *tasks_dir = "tasks", *backends = "auto";
  const char *cache = NULL, *triton_python = NULL, *triton_cache = NULL, *command_path = NULL;
  int verbose = 0, c;
  double hb_interval = GX_HEARTBEAT_S;
  /* KA_ADAPTIVE_REPS: the default of --adaptive-reps (test scripts set 1) */
  const char *ar_env = getenv("KA_ADAPTIVE_REPS");
  int adaptive = GX_ADAPTIVE_REPS, ref_mb = gx_default_ref_cache_mb(), command_pairs = 1;
  if (ar_env && *ar_env) {
    char *end;
    long v = strtol(ar_env, &end, 10);
    if (*end || v < 1 || v > 100) {
      fprintf(stderr, "gpuexec: KA_ADAPTIVE_REPS needs an integer from 1 to 100, not '%s'\n",
              ar_env);
      return 2;
    }
    adaptive = (int)v;
  }
  int pool = 1, per_device = GX_JOBS_PER_DEVICE, per_device_given = 0, prefetch = 1;
  double call_limit = GX_CALL_LIMIT_S;
  int timed_budget_ms = GX_TIMED_BUDGET_MS;
  while ((c = getopt_long(argc, argv, "s:t:b:c:vhH:A:R:PFJ:L:T:C:B:X:Q:", opts, NULL)) != -1) {
    switch (c) {
      case 's':
        server = optarg;
        break;
      case 't':
        tasks_dir = optarg;
        break;
      case 'b':
        backends = optarg;
        break;
      case 'c':
        cache = optarg;
        break;
      case 'F':
        prefetch = 0;
        break;
      case 'v':
        verbose = 1;
        break;
      case 'H':
        if (ka_opt_double("gpuexec", "heartbeat-interval", optarg, 0, 3600, &hb_interval)) return 2;
        break;
      case 'A':
        if (ka_opt_int("gpuexec", "adaptive-reps", optarg, 1, 100, &adaptive)) return 2;
        break;
      case 'P':
        pool = 0;
        break;
      case 'J':
        per_device_given = 1;
        if (ka_opt_int("gpuexec", "jobs-per-device", optarg, 1, GX_MAX_JOBS_PER_DEVICE,
                       &per_device))
          return 2;
        break;
      case 'L':
        if (ka_opt_double("gpuexec", "call-limit", optarg, 0, 86400, &call_limit)) return 2;
        break;
      case 'B':
        if (ka_opt_int("gpuexec", "timed-budget-ms", optarg, 1, 600000, &timed_budget_ms)) return 2;
        break;
      case 'R':
        if (ka_opt_int("gpuexec", "ref-cache-mb", optarg, 0, 1L << 24, &ref_mb)) return 2;
        break;
      case 'T':
        triton_python = optarg;
        break;
      case 'X':
        command_path = optarg;
        break;
      case 'Q':
        if (ka_opt_int("gpuexec", "command-pairs", optarg, 1, KA_CMD_PAIRS_MAX, &command_pairs))
          return 2;
        break;
      case 'C':
        triton_cache = optarg;
        break;
      case 'a':
        gx_tls.ca = optarg;
        break;
      case 'E':
        gx_tls.cert = optarg;
        break;
      case 'K':
        gx_tls.key = optarg;
        break;
      case 'N':
        gx_tls_server_name = optarg;
        break;
      case 'h':
        gx_usage(stdout);
        return 0;
      default:
        gx_usage(stderr);
        return 2;
    }
  }
  if (gx_dial_check(server)) return 2;
  signal(SIGPIPE, SIG_IGN);
  struct sigaction sa = {.sa_handler = gx_on_signal};
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  char err[1024];
  ka_registry *reg;
  if (ka_registry_load(tasks_dir, 1, &reg, err, sizeof err)) {
    fprintf(stderr, "gpuexec: %s\n", err);
    return 1;
  }
  char exedir[PATH_MAX], runner[PATH_MAX + 16], cachebuf[PATH_MAX];
  if (ka_exe_dir(exedir, sizeof exedir)) return 1;
  ka_helper_path("ka-runner", runner, sizeof runner);
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp) tmp = "/tmp";
  if (!cache) {
    snprintf(cachebuf, sizeof cachebuf, "%s/kernelarena-cache-%d", tmp, (int)getuid());
    cache = cachebuf;
  }
  gx_reap_stale(tmp);
  if (gx_hide(tasks_dir, cache, triton_cache)) return 1;
  char own_tmp[PATH_MAX];
  snprintf(own_tmp, sizeof own_tmp, "%s/%s%d", tmp, GX_OWN_PREFIX, (int)getpid());
  if (mkdir(own_tmp, 0700) != 0 && errno != EEXIST) {
    fprintf(stderr, "gpuexec: cannot create %s: %s\n", own_tmp, strerror(errno));
    return 1;
  }
  ka_exec_config cfg = {.server_url = server,
                        .command_path = command_path,
                        .command_pairs = command_pairs,
                        .no_prefetch = !prefetch,
                        .runner_path = runner,
                        .cache_dir = cache,
                        .tmp_dir = own_tmp,
                        .tasks = reg,
                        .verbose = verbose,
                        .adaptive_reps = adaptive,
                        .ref_cache = ka_refcache_new((size_t)ref_mb << 20),
                        .pool = pool,
                        .jobs_per_device = per_device,
                        .host_slots = per_device_given ? per_device : 1,
                        .call_limit_s = call_limit,
                        .timed_budget_s = timed_budget_ms / 1e3};
  if (!cfg.ref_cache) {
    fprintf(stderr, "gpuexec: out of memory\n");
    return 1;
  }

  const char *all[] = {"host", "cuda", "hip"};
  char list[256];
  snprintf(list, sizeof list, "%s", strcmp(backends, "auto") ? backends : "cuda,hip,host");
  gx_worker *workers = NULL;
  int nworkers = 0;
  char host[128] = "host";
  gethostname(host, sizeof host);
  for (char *save = NULL, *b = strtok_r(list, ",", &save); b; b = strtok_r(NULL, ",", &save)) {
    int known = 0;
    for (int i = 0; i < 3; i++) known |= !strcmp(all[i], b);
    if (!known) {
      fprintf(stderr, "gpuexec: unknown backend '%s' (host, cuda or hip)\n", b);
      rmdir(own_tmp);
      gx_free_early(reg, &cfg, workers, nworkers);
      return 2;
    }
    Kernelarena__V1__DescribeResponse *d;
    err[0] = 0;
    if (gx_discover(runner, b, &d, err, sizeof err)) {
      fprintf(stderr, "gpuexec: backend %s: %s\n", b, err);
      continue;
    }
    if (d->n_devices == 0) fprintf(stderr, "gpuexec: backend %s: no devices (%s)\n", b, err);
    int triton = !strcmp(b, "cuda") && d->n_devices > 0 &&
                 gx_triton(reg, exedir, cache, triton_python, triton_cache);
    /* one worker per evaluation slot: GPU devices have per_device of them */
    int slots = strcmp(b, "host") || per_device_given ? per_device : 1;
    for (size_t i = 0; i < d->n_devices; i++)
      for (int k = 0; k < slots; k++) {
        gx_worker *nw = realloc(workers, sizeof *workers * (size_t)(nworkers + 1));
        if (!nw) return 1;
        workers = nw;
        gx_worker *w = &workers[nworkers++];
        memset(w, 0, sizeof *w);
        w->cfg = &cfg;
        w->dev = ka_device_dup(d->devices[i]);
        if (triton && w->dev && (w->dev->languages = malloc(sizeof(char *)))) {
          w->dev->languages[0] = strdup("triton");
          w->dev->n_languages = 1;
        }
        w->hb_interval_s = hb_interval;
        int n = snprintf(w->id, sizeof w->id, "%s/%d/%s:%d", host, (int)getpid(), b,
                         d->devices[i]->index);
        if (k > 0 && n > 0 && (size_t)n < sizeof w->id)
          snprintf(w->id + n, sizeof w->id - (size_t)n, "#%d", k);
        fprintf(stderr, "gpuexec: worker %s: %s (%s)\n", w->id, w->dev->name, w->dev->arch);
      }
    kernelarena__v1__describe_response__free_unpacked(d, NULL);
  }
  if (nworkers == 0) {
    fprintf(stderr, "gpuexec: no devices found on any backend\n");
    rmdir(own_tmp);
    gx_free_early(reg, &cfg, workers, nworkers);
    return 1;
  }
  for (int i = 0; i < nworkers; i++) {
    pthread_mutex_init(&workers[i].hb.mu, NULL);
    pthread_cond_init(&workers[i].hb.cv, NULL);
    pthread_create(&workers[i].thread, NULL, gx_worker_main, &workers[i]);
  }
  fprintf(stderr, "gpuexec: %d worker(s) polling %s\n", nworkers, server);
  /* The signal may be delivered to any thread (a worker's handler then sets gx_stop and
   * pause() here never returns), so look at the flag a few times a second instead. */
  while (!atomic_load(&gx_stop)) {
    struct timespec tick = {0, 200 * 1000 * 1000};
    nanosleep(&tick, NULL);
  }
  fprintf(stderr, "gpuexec: stopping\n");
  /* Workers may be inside an evaluation; their runners die with their process
   * groups' deadlines. Exit without waiting for a poll to time out. */
  ka_kill_runners();
  ka_pool_drain();
  ka_rmtree(own_tmp); /* the evaluation folders of jobs cut short */
  fflush(NULL);
  _exit(0);
}
