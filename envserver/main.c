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

/* What envserver's options give besides the server's settings, and the paths made from
 * them (main_paths). The paths live as long as the server: its config points into them. */
typedef struct main_args {
  const char *listen;     /* --listen; NULL: ipc://<state>/env.ipc */
  const char *exec;       /* --exec-listen; NULL: ipc://<state>/exec.ipc */
  const char *tasks;      /* --tasks, default ./tasks */
  const char *state;      /* --state, default ./var */
  const char *token_file; /* --admin-token-file; NULL: KA_ADMIN_TOKEN or <state>/admin.token */
  char state_abs[PATH_MAX], tasks_abs[PATH_MAX];
  char ws[PATH_MAX + 16], db[PATH_MAX + 16], lurl[PATH_MAX + 16], eurl[PATH_MAX + 16];
} main_args;

/* Parses envserver's options into the settings of s (holding their defaults) and a;
 * prints the usage for --help (stdout) or a bad option (stderr). Returns -1 to go on,
 * else the exit code: 0 after --help, 2 for a bad option or an extra argument. */
static int main_parse(int argc, char **argv, es_server *s, main_args *a) {
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
  int ttl = (int)ES_IDLE_TTL_S;
  int ch;
  while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (ch) {
      case 'l':
        a->listen = optarg;
        break;
      case 'e':
        a->exec = optarg;
        break;
      case 't':
        a->tasks = optarg;
        break;
      case 's':
        a->state = optarg;
        break;
      case 'c':
        if (ka_opt_int("envserver", "contexts", optarg, 1, 4096, &s->cfg.contexts)) return 2;
        break;
      case 'm':
        if (ka_opt_int("envserver", "max-steps", optarg, 1, ES_MAX_STEPS_CAP, &s->cfg.max_steps))
          return 2;
        break;
      case 'E':
        if (ka_opt_int("envserver", "max-episodes", optarg, 1, ES_MAX_OPEN_EPISODES,
                       &s->cfg.max_episodes))
          return 2;
        break;
      case 'Q':
        if (ka_opt_int("envserver", "max-queued", optarg, 1, ES_MAX_QUEUED_JOBS,
                       &s->cfg.max_queued))
          return 2;
        break;
      case 'I':
        if (ka_opt_int("envserver", "idle-ttl", optarg, 0, 30 * 86400, &ttl)) return 2;
        s->cfg.idle_ttl_s = ttl;
        break;
      case 'A':
        a->token_file = optarg;
        break;
      case 'H': {
        int hb;
        if (ka_opt_int("envserver", "heartbeat-timeout", optarg, 1, 3600, &hb)) return 2;
        s->jobs.heartbeat_lost_s = hb;
        break;
      }
      case 'M': {
        int mb;
        if (ka_opt_int("envserver", "max-inflight-mb", optarg, 1, 1 << 20, &mb)) return 2;
        s->cfg.max_inflight_bytes = (size_t)mb << 20;
        break;
      }
      case 'C':
        s->cfg.tls_cert = optarg;
        break;
      case 'K':
        s->cfg.tls_key = optarg;
        break;
      case 'a':
        s->cfg.tls_ca = optarg;
        break;
      case 'u':
        s->cfg.tls_client_ca = optarg;
        break;
      case 'X':
        s->cfg.insecure_executors = 1;
        break;
      case 'q':
        s->cfg.quiet = 1;
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
  return -1;
}

/* Makes the state folder and its workspaces/ folder, resolves the state and task
 * folders to absolute paths and sets the server's folders and endpoints from a (the
 * defaults under the state folder). Returns 0, or 1 after printing why. */
static int main_paths(es_server *s, main_args *a) {
  /* Absolute paths: workspaces are reported to clients, ipc:// paths must not depend on
   * the working directory of whoever reads them. */
  if (ka_mkdirs(a->state) != KA_OK || !realpath(a->state, a->state_abs)) {
    fprintf(stderr, "envserver: cannot create state folder %s: %s\n", a->state, strerror(errno));
    return 1;
  }
  if (!realpath(a->tasks, a->tasks_abs)) {
    fprintf(stderr, "envserver: task folder %s: %s\n", a->tasks, strerror(errno));
    return 1;
  }
  snprintf(a->ws, sizeof a->ws, "%s/workspaces", a->state_abs);
  snprintf(a->db, sizeof a->db, "%s/trace.db", a->state_abs);
  snprintf(a->lurl, sizeof a->lurl, "ipc://%s/env.ipc", a->state_abs);
  snprintf(a->eurl, sizeof a->eurl, "ipc://%s/exec.ipc", a->state_abs);
  if (ka_mkdirs(a->ws) != KA_OK) {
    fprintf(stderr, "envserver: cannot create %s\n", a->ws);
    return 1;
  }
  s->cfg.state_dir = a->state_abs;
  s->cfg.tasks_dir = a->tasks_abs;
  s->cfg.listen_url = (char *)(a->listen ? a->listen : a->lurl);
  s->cfg.exec_url = (char *)(a->exec ? a->exec : a->eurl);
  return 0;
}

/* Loads the admin token into s->cfg.admin_token (owned by s; left NULL when there is
 * none): --admin-token-file, else <state>/admin.token when present, else
 * KA_ADMIN_TOKEN. Returns 0, or 1 after printing why the token file cannot be read. */
static int main_admin_token(es_server *s, const main_args *a) {
  /* The admin token: --admin-token-file, else KA_ADMIN_TOKEN, else <state>/admin.token.
   * Surrounding white space is dropped; an empty token counts as none. */
  char tfile[PATH_MAX + 16];
  snprintf(tfile, sizeof tfile, "%s/admin.token", a->state_abs);
  char *token = NULL;
  if (a->token_file || access(tfile, F_OK) == 0) {
    const char *tf = a->token_file ? a->token_file : tfile;
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
      s->cfg.admin_token = token;
    else
      free(token);
  }
  return 0;
}

/* Loads the task registry of a->tasks_abs into s->reg (and the longest task timeout
 * into s->max_task_timeout_s) and opens the trace store a->db into s->store. Returns
 * 0, or 1 after printing why (nothing left loaded). */
static int main_load(es_server *s, const main_args *a) {
  char err[1024] = "";
  if (ka_registry_load(a->tasks_abs, 1, &s->reg, err, sizeof err) != KA_OK) {
    fprintf(stderr, "envserver: %s\n", err);
    return 1;
  }
  for (int i = 0; i < s->reg->ntasks; i++)
    if (s->reg->tasks[i]->timeout_s > s->max_task_timeout_s)
      s->max_task_timeout_s = s->reg->tasks[i]->timeout_s;
  if (es_store_open(a->db, &s->store, err, sizeof err) != KA_OK) {
    fprintf(stderr, "envserver: %s\n", err);
    ka_registry_free(s->reg);
    return 1;
  }
  return 0;
}

/* Starts the server s and waits for SIGINT or SIGTERM (sigwait): the signals are
 * blocked first, before any thread starts, so every thread inherits the mask; SIGPIPE
 * is ignored. Returns 0 after a signal, 1 after printing why the server did not start. */
static int main_serve(es_server *s) {
  char err[1024] = "";
  /* Block the signals before any thread starts, so every thread inherits the mask. */
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  signal(SIGPIPE, SIG_IGN);
  if (es_server_start(s, err, sizeof err) != KA_OK) {
    fprintf(stderr, "envserver: %s\n", err);
    return 1;
  }
  fprintf(stderr, "envserver: listening on %s (executors: %s), %d tasks\n", s->cfg.listen_url,
          s->cfg.exec_url, s->reg->ntasks);
  if (s->reg->ntasks == 0) /* it serves nothing: say so where the operator looks */
    fprintf(stderr,
            "envserver: warning: no task loaded from --tasks %s (%d skipped: the lines above say "
            "why; `envctl tasks --tasks DIR` checks a folder)\n",
            s->cfg.tasks_dir, s->reg->nskipped);
  int sig = 0;
  sigwait(&sigs, &sig);
  es_log(s, "%s: shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
  return 0;
}

/* Stops the server s (started or not) and frees what main_load and main_admin_token
 * made: the store, the jobs, the episode table, the registry, the admin token. */
static void main_shutdown(es_server *s) {
  es_server_stop(s);
  es_store_close(s->store);
  pthread_mutex_lock(&s->mtx);
  es_jobs_clear(&s->jobs);
  es_ep_table_free(s);
  pthread_mutex_unlock(&s->mtx);
  pthread_mutex_destroy(&s->mtx);
  ka_registry_free(s->reg);
  free(s->cfg.admin_token);
}

/* envserver: parses the options, sets up the folders, the admin token, the tasks and
 * the store, then serves until SIGINT or SIGTERM. Exits 0 after a signal, 1 when it
 * cannot start, 2 for a usage error. */
int main(int argc, char **argv) {
  es_server s;
  memset(&s, 0, sizeof s);
  main_args a = {.tasks = "./tasks", .state = "./var"};
  s.cfg.contexts = 64;
  s.cfg.max_steps = 10;
  s.cfg.max_episodes = ES_MAX_OPEN_EPISODES;
  s.cfg.max_queued = ES_MAX_QUEUED_JOBS;
  s.cfg.idle_ttl_s = ES_IDLE_TTL_S;
  int rc = main_parse(argc, argv, &s, &a);
  if (rc >= 0) return rc;
  if (main_paths(&s, &a) || main_admin_token(&s, &a) || main_load(&s, &a)) return 1;
  pthread_mutex_init(&s.mtx, NULL);
  rc = main_serve(&s);
  main_shutdown(&s);
  return rc;
}
