/* envserver: the kernelarena environment server.
 *
 *   envserver [--listen URL] [--exec-listen URL] [--tasks DIR] [--state DIR]
 *             [--contexts N] [--max-steps N] [--max-episodes N] [--max-queued N]
 *             [--idle-ttl S] [--admin-token-file PATH] [--quiet]
 *             [--tls-cert PEM --tls-key PEM --tls-ca PEM] [--tls-client-ca PEM]
 *             [--insecure-executors]
 *
 * Clients (trainers, envctl) speak the environment protocol on --listen; gpuexec
 * workers long-poll for jobs on --exec-listen (docs/protocol.md). Across hosts both
 * take tls+tcp:// URLs; executors then authenticate with certificates of --tls-ca
 * (docs/deploy.md), clients too with --tls-client-ca, and a plain tcp:// executor endpoint
 * off loopback is refused unless --insecure-executors. Episodes' workspaces
 * and the trace store (trace.db, docs/trace-store.md) live under --state.
 *
 * SIGINT and SIGTERM close the sockets, let the sqlite transaction in flight finish and
 * exit 0. The signals are blocked in every thread and taken with sigwait in main, so
 * no handler runs inside nng or sqlite. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "envserver.h"
#include "ka_opt.h"

static void main_usage(FILE *f) {
  fprintf(f,
          "usage: envserver [options]\n"
          "  --listen URL       client endpoint (default ipc://<state>/env.ipc)\n"
          "  --exec-listen URL  executor endpoint (default ipc://<state>/exec.ipc)\n"
          "  --tasks DIR        task suite (default ./tasks)\n"
          "  --state DIR        workspaces and trace.db (default ./var, created)\n"
          "  --contexts N       requests served concurrently per endpoint (default 64)\n"
          "  --max-steps N      default step limit of an episode (default 10)\n"
          "  --max-episodes N   open episodes before Reset answers CAPACITY (default 100000)\n"
          "  --max-queued N     queued evaluations before CAPACITY (default 65536)\n"
          "  --idle-ttl S       close episodes idle for S seconds (default 3600; 0 never)\n"
          "  --admin-token-file PATH  token that allows held-out scoring (Evaluate\n"
          "                     include_held_out); default <state>/admin.token if present.\n"
          "                     KA_ADMIN_TOKEN in the environment works too.\n"
          "  --max-inflight-mb N  bytes of requests and evaluations held at once before\n"
          "                     requests are refused RESOURCE_EXHAUSTED (default 512)\n"
          "  --heartbeat-timeout S  a worker that sends heartbeats is lost S seconds after\n"
          "                     its last one; its job is re-dispatched (default 15)\n"
          "  --tls-cert PEM     the server's certificate for tls+tcp:// endpoints\n"
          "  --tls-key PEM      its private key (unencrypted PEM)\n"
          "  --tls-ca PEM       the CA that signed the executors' certificates: a tls+tcp://\n"
          "                     --exec-listen admits only executors presenting one\n"
          "  --tls-client-ca PEM  the CA that signed the clients' certificates: the\n"
          "                     tls+tcp:// --listen then admits only clients presenting one\n"
          "  --insecure-executors  allow a plain tcp:// (or ws://) --exec-listen on an\n"
          "                     address other hosts can reach (refused without it)\n"
          "  --quiet            log only errors\n"
          "  --help             this text\n");
}

int main(int argc, char **argv) {
  static const struct option opts[] = {{"listen", required_argument, NULL, 'l'},
                                       {"exec-listen", required_argument, NULL, 'e'},
                                       {"tasks", required_argument, NULL, 't'},
                                       {"state", required_argument, NULL, 's'},
                                       {"contexts", required_argument, NULL, 'c'},
                                       {"max-steps", required_argument, NULL, 'm'},
                                       {"max-episodes", required_argument, NULL, 'E'},
                                       {"max-queued", required_argument, NULL, 'Q'},
                                       {"idle-ttl", required_argument, NULL, 'I'},
                                       {"admin-token-file", required_argument, NULL, 'A'},
                                       {"heartbeat-timeout", required_argument, NULL, 'H'},
                                       {"max-inflight-mb", required_argument, NULL, 'M'},
                                       {"tls-cert", required_argument, NULL, 'C'},
                                       {"tls-key", required_argument, NULL, 'K'},
                                       {"tls-ca", required_argument, NULL, 'a'},
                                       {"tls-client-ca", required_argument, NULL, 'u'},
                                       {"insecure-executors", no_argument, NULL, 'X'},
                                       {"quiet", no_argument, NULL, 'q'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  es_server s;
  memset(&s, 0, sizeof s);
  const char *listen = NULL, *exec = NULL, *tasks = "./tasks", *state = "./var";
  s.cfg.contexts = 64;
  s.cfg.max_steps = 10;
  s.cfg.max_episodes = ES_MAX_OPEN_EPISODES;
  s.cfg.max_queued = ES_MAX_QUEUED_JOBS;
  s.cfg.idle_ttl_s = ES_IDLE_TTL_S;
  const char *token_file = NULL;
  int ttl = (int)ES_IDLE_TTL_S;
  int ch;
  while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (ch) {
      case 'l':
        listen = optarg;
        break;
      case 'e':
        exec = optarg;
        break;
      case 't':
        tasks = optarg;
        break;
      case 's':
        state = optarg;
        break;
      case 'c':
        if (ka_opt_int("envserver", "contexts", optarg, 1, 4096, &s.cfg.contexts)) return 2;
        break;
      case 'm':
        if (ka_opt_int("envserver", "max-steps", optarg, 1, ES_MAX_STEPS_CAP, &s.cfg.max_steps))
          return 2;
        break;
      case 'E':
        if (ka_opt_int("envserver", "max-episodes", optarg, 1, ES_MAX_OPEN_EPISODES,
                       &s.cfg.max_episodes))
          return 2;
        break;
      case 'Q':
        if (ka_opt_int("envserver", "max-queued", optarg, 1, ES_MAX_QUEUED_JOBS, &s.cfg.max_queued))
          return 2;
        break;
      case 'I':
        if (ka_opt_int("envserver", "idle-ttl", optarg, 0, 30 * 86400, &ttl)) return 2;
        s.cfg.idle_ttl_s = ttl;
        break;
      case 'A':
        token_file = optarg;
        break;
      case 'H': {
        int hb;
        if (ka_opt_int("envserver", "heartbeat-timeout", optarg, 1, 3600, &hb)) return 2;
        s.jobs.heartbeat_lost_s = hb;
        break;
      }
      case 'M': {
        int mb;
        if (ka_opt_int("envserver", "max-inflight-mb", optarg, 1, 1 << 20, &mb)) return 2;
        s.cfg.max_inflight_bytes = (size_t)mb << 20;
        break;
      }
      case 'C':
        s.cfg.tls_cert = optarg;
        break;
      case 'K':
        s.cfg.tls_key = optarg;
        break;
      case 'a':
        s.cfg.tls_ca = optarg;
        break;
      case 'u':
        s.cfg.tls_client_ca = optarg;
        break;
      case 'X':
        s.cfg.insecure_executors = 1;
        break;
      case 'q':
        s.cfg.quiet = 1;
        break;
      case 'h':
        main_usage(stdout);
        return 0;
      default:
        main_usage(stderr);
        return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "envserver: unexpected argument '%s'\n", argv[optind]);
    main_usage(stderr);
    return 2;
  }

  /* Absolute paths: workspaces are reported to clients, ipc:// paths must not depend on
   * the working directory of whoever reads them. */
  char state_abs[PATH_MAX], tasks_abs[PATH_MAX];
  if (ka_mkdirs(state) != KA_OK || !realpath(state, state_abs)) {
    fprintf(stderr, "envserver: cannot create state folder %s: %s\n", state, strerror(errno));
    return 1;
  }
  if (!realpath(tasks, tasks_abs)) {
    fprintf(stderr, "envserver: task folder %s: %s\n", tasks, strerror(errno));
    return 1;
  }
  char ws[PATH_MAX + 16], db[PATH_MAX + 16], lurl[PATH_MAX + 16], eurl[PATH_MAX + 16];
  snprintf(ws, sizeof ws, "%s/workspaces", state_abs);
  snprintf(db, sizeof db, "%s/trace.db", state_abs);
  snprintf(lurl, sizeof lurl, "ipc://%s/env.ipc", state_abs);
  snprintf(eurl, sizeof eurl, "ipc://%s/exec.ipc", state_abs);
  if (ka_mkdirs(ws) != KA_OK) {
    fprintf(stderr, "envserver: cannot create %s\n", ws);
    return 1;
  }
  s.cfg.state_dir = state_abs;
  s.cfg.tasks_dir = tasks_abs;
  s.cfg.listen_url = (char *)(listen ? listen : lurl);
  s.cfg.exec_url = (char *)(exec ? exec : eurl);

  char err[1024] = "";
  /* The admin token: --admin-token-file, else KA_ADMIN_TOKEN, else <state>/admin.token.
   * Surrounding white space is dropped; an empty token counts as none. */
  char tfile[PATH_MAX + 16];
  snprintf(tfile, sizeof tfile, "%s/admin.token", state_abs);
  char *token = NULL;
  if (token_file || access(tfile, F_OK) == 0) {
    const char *tf = token_file ? token_file : tfile;
    if (ka_read_file(tf, 4096, &token, NULL) != KA_OK) {
      fprintf(stderr, "envserver: cannot read the admin token file %s\n", tf);
      return 1;
    }
  } else if (getenv("KA_ADMIN_TOKEN")) {
    token = es_xstrdup(getenv("KA_ADMIN_TOKEN"));
  }
  if (token) {
    char *b = token, *e = token + strlen(token);
    while (*b && strchr(" \t\r\n", *b)) b++;
    while (e > b && strchr(" \t\r\n", e[-1])) *--e = 0;
    memmove(token, b, strlen(b) + 1);
    if (*token)
      s.cfg.admin_token = token;
    else
      free(token);
  }
  if (ka_registry_load(tasks_abs, 1, &s.reg, err, sizeof err) != KA_OK) {
    fprintf(stderr, "envserver: %s\n", err);
    return 1;
  }
  for (int i = 0; i < s.reg->ntasks; i++)
    if (s.reg->tasks[i]->timeout_s > s.max_task_timeout_s)
      s.max_task_timeout_s = s.reg->tasks[i]->timeout_s;
  if (es_store_open(db, &s.store, err, sizeof err) != KA_OK) {
    fprintf(stderr, "envserver: %s\n", err);
    ka_registry_free(s.reg);
    return 1;
  }
  pthread_mutex_init(&s.mtx, NULL);

  /* Block the signals before any thread starts, so every thread inherits the mask. */
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  signal(SIGPIPE, SIG_IGN);

  int rc = 0;
  if (es_server_start(&s, err, sizeof err) != KA_OK) {
    fprintf(stderr, "envserver: %s\n", err);
    rc = 1;
  } else {
    fprintf(stderr, "envserver: listening on %s (executors: %s), %d tasks\n", s.cfg.listen_url,
            s.cfg.exec_url, s.reg->ntasks);
    int sig = 0;
    sigwait(&sigs, &sig);
    es_log(&s, "%s: shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
  }
  es_server_stop(&s);
  es_store_close(s.store);
  pthread_mutex_lock(&s.mtx);
  es_jobs_clear(&s.jobs);
  es_ep_table_free(&s);
  pthread_mutex_unlock(&s.mtx);
  pthread_mutex_destroy(&s.mtx);
  ka_registry_free(s.reg);
  free(s.cfg.admin_token);
  return rc;
}
