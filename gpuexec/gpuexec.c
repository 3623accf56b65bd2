/* gpuexec: the executor daemon.
 *
 * Discovers the devices of each backend (through `ka-runner --discover`, so this
 * process never loads a vendor library), starts one worker thread per device, and
 * each worker long-polls the envserver's executor socket for jobs (pull model: an
 * executor dials the server, so executors on other hosts work the same way). */
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
#include <sys/wait.h>
#include <unistd.h>

#include "gpuexec.h"
#include "ka_common.h"

#define GX_POLL_WAIT_MS 5000

typedef struct gx_worker {
  pthread_t thread;
  const ka_exec_config *cfg;
  Kernelarena__V1__Device *dev;
  char id[256];
} gx_worker;

static atomic_int gx_stop;

static void gx_on_signal(int sig) {
  atomic_store(&gx_stop, sig);
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

static void *gx_worker_main(void *arg) {
  gx_worker *w = arg;
  nng_socket sock;
  int rv = nng_req0_open(&sock);
  if (rv) {
    fprintf(stderr, "gpuexec: %s: nng_req0_open: %s\n", w->id, nng_strerror(rv));
    return NULL;
  }
  /* The REQ resend timer would evaluate a job twice; turn it off. */
  nng_socket_set_ms(sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
  nng_socket_set_ms(sock, NNG_OPT_RECVTIMEO, GX_POLL_WAIT_MS + 30000);
  nng_socket_set_ms(sock, NNG_OPT_SENDTIMEO, 10000);
  nng_socket_set_size(sock, NNG_OPT_RECVMAXSZ, 256u << 20);
  nng_socket_set_ms(sock, NNG_OPT_RECONNMINT, 100);
  nng_socket_set_ms(sock, NNG_OPT_RECONNMAXT, 2000);
  if ((rv = nng_dial(sock, w->cfg->server_url, NULL, NNG_FLAG_NONBLOCK))) {
    fprintf(stderr, "gpuexec: %s: dial %s: %s\n", w->id, w->cfg->server_url, nng_strerror(rv));
    nng_close(sock);
    return NULL;
  }
  Kernelarena__V1__Result pending = KERNELARENA__V1__RESULT__INIT;
  int have_pending = 0, warned = 0;
  uint64_t reqid = 0;
  while (!atomic_load(&gx_stop)) {
    Kernelarena__V1__ExecRequest req = KERNELARENA__V1__EXEC_REQUEST__INIT;
    Kernelarena__V1__WorkerPoll poll = KERNELARENA__V1__WORKER_POLL__INIT;
    poll.worker_id = w->id;
    poll.device = w->dev;
    poll.wait_ms = GX_POLL_WAIT_MS;
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
        fprintf(stderr, "gpuexec: %s: cannot reach %s (%s); retrying\n", w->id, w->cfg->server_url,
                nng_strerror(rv));
      sleep(1);
      continue;
    }
    nng_msg *reply;
    if ((rv = nng_recvmsg(sock, &reply, 0)) != 0) {
      if (!warned++)
        fprintf(stderr, "gpuexec: %s: no answer from %s (%s); retrying\n", w->id,
                w->cfg->server_url, nng_strerror(rv));
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
      if (w->cfg->verbose)
        fprintf(stderr, "gpuexec: %s: job %s (%s)\n", w->id, job->job_id, job->task_id);
      ka_evaluate(w->cfg, w->dev, job, &pending);
      have_pending = 1;
      if (w->cfg->verbose)
        fprintf(stderr, "gpuexec: %s: job %s -> status %d in %.2f s\n", w->id, job->job_id,
                pending.status, pending.wall_s);
    }
    kernelarena__v1__exec_response__free_unpacked(resp, NULL);
  }
  if (have_pending) ka_result_clear(&pending);
  nng_close(sock);
  return NULL;
}

static void gx_usage(FILE *f) {
  fprintf(f,
          "usage: gpuexec [options]\n"
          "  --server URL     envserver executor URL (default ipc://var/exec.ipc)\n"
          "  --tasks DIR      task folder, the same tasks as the server (default ./tasks)\n"
          "  --backends LIST  comma-separated: host,cuda,hip or auto (default auto: every\n"
          "                   backend that finds a device)\n"
          "  --cache DIR      compiled references (default $TMPDIR/kernelarena-cache)\n"
          "  --verbose        log every job\n");
}

int main(int argc, char **argv) {
  static const struct option opts[] = {{"server", required_argument, 0, 's'},
                                       {"tasks", required_argument, 0, 't'},
                                       {"backends", required_argument, 0, 'b'},
                                       {"cache", required_argument, 0, 'c'},
                                       {"verbose", no_argument, 0, 'v'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *server = "ipc://var/exec.ipc", *tasks_dir = "tasks", *backends = "auto";
  const char *cache = NULL;
  int verbose = 0, c;
  while ((c = getopt_long(argc, argv, "s:t:b:c:vh", opts, NULL)) != -1) {
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
      case 'v':
        verbose = 1;
        break;
      case 'h':
        gx_usage(stdout);
        return 0;
      default:
        gx_usage(stderr);
        return 2;
    }
  }
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
  snprintf(runner, sizeof runner, "%s/ka-runner", exedir);
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp) tmp = "/tmp";
  if (!cache) {
    snprintf(cachebuf, sizeof cachebuf, "%s/kernelarena-cache-%d", tmp, (int)getuid());
    cache = cachebuf;
  }
  ka_exec_config cfg = {.server_url = server,
                        .runner_path = runner,
                        .cache_dir = cache,
                        .tmp_dir = tmp,
                        .tasks = reg,
                        .verbose = verbose};

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
      return 2;
    }
    Kernelarena__V1__DescribeResponse *d;
    err[0] = 0;
    if (gx_discover(runner, b, &d, err, sizeof err)) {
      fprintf(stderr, "gpuexec: backend %s: %s\n", b, err);
      continue;
    }
    if (d->n_devices == 0) fprintf(stderr, "gpuexec: backend %s: no devices (%s)\n", b, err);
    for (size_t i = 0; i < d->n_devices; i++) {
      gx_worker *nw = realloc(workers, sizeof *workers * (size_t)(nworkers + 1));
      if (!nw) return 1;
      workers = nw;
      gx_worker *w = &workers[nworkers++];
      memset(w, 0, sizeof *w);
      w->cfg = &cfg;
      w->dev = ka_device_dup(d->devices[i]);
      snprintf(w->id, sizeof w->id, "%s/%d/%s:%d", host, (int)getpid(), b, d->devices[i]->index);
      fprintf(stderr, "gpuexec: worker %s: %s (%s)\n", w->id, w->dev->name, w->dev->arch);
    }
    kernelarena__v1__describe_response__free_unpacked(d, NULL);
  }
  if (nworkers == 0) {
    fprintf(stderr, "gpuexec: no devices found on any backend\n");
    return 1;
  }
  for (int i = 0; i < nworkers; i++)
    pthread_create(&workers[i].thread, NULL, gx_worker_main, &workers[i]);
  fprintf(stderr, "gpuexec: %d worker(s) polling %s\n", nworkers, server);
  while (!atomic_load(&gx_stop)) pause();
  fprintf(stderr, "gpuexec: stopping\n");
  /* Workers may be inside an evaluation; their runners die with their process
   * groups' deadlines. Exit without waiting for a poll to time out. */
  ka_kill_runners();
  fflush(NULL);
  _exit(0);
}
