/* envctl: the kernelarena command line.
 *
 *   envctl tasks   [--server URL] [--tasks DIR]
 *   envctl health  --server URL
 *   envctl episode --task ID [--agent baseline|command:CMD|files:DIR] [--max-steps N]
 *                  [--seed S] [--server URL] [--tasks DIR] [--backends LIST]
 *
 * Without --server, envctl starts an envserver and a gpuexec of its own for the
 * command (the binaries beside envctl), on a private state folder, and stops them at
 * the end. */
#include "envctl.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "ka_common.h"
#include "task.h"

static void ec_usage(FILE *f) {
  fprintf(f,
          "usage: envctl COMMAND [options]\n"
          "commands:\n"
          "  tasks                 list the tasks\n"
          "  episode --task ID     run one episode and print every step\n"
          "  health                ask a running server how it is\n"
          "  export                episodes as JSONL: --server URL --run R | --episode E\n"
          "  replay EPISODE        re-evaluate a recorded episode's steps (--server URL)\n"
          "  validate [TASK...]    check task definitions (envctl validate --help)\n"
          "  agent --task ID       one episode with a coding-agent adapter (--help)\n"
          "  step                  inside an agent's workspace: evaluate its files (--help)\n"
          "  mcp                   MCP server (stdio) with the tools evaluate, last_result\n"
          "  run --config FILE     agent episodes of a run config (--resume RUN; --help)\n"
          "  compare RUN_A RUN_B   paired comparison of two runs, with a verdict (--help)\n"
          "  report RUN... -o F    self-contained HTML report of runs (--help)\n"
          "options:\n"
          "  --server URL          a running envserver (default: start one for this command)\n"
          "  --tasks DIR           task folder (default ./tasks, else the source tree's)\n"
          "  --backends LIST       backends of the embedded executor (default auto)\n"
          "  --agent AGENT         baseline (default) | files:DIR | command:CMD\n"
          "  --max-steps N         steps in the episode (default 1)\n"
          "  --seed S              episode seed (default: drawn by the server)\n"
          "  --workspace DIR       where command agents edit files (default: a new, kept\n"
          "                        $TMPDIR/kernelarena-ws-XXXXXX)\n"
          "  --timeout S           per-request timeout in seconds (default 900)\n"
          "  --agent-timeout S     per-run limit of a command agent (default 600)\n"
          "  --verbose             show server and executor logs, and each step's whole\n"
          "                        runtime log (the runner's timings per case and phase)\n");
}

int ec_print_error(const char *what, const Kernelarena__V1__Response *r) {
  if (r && r->body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR)
    fprintf(stderr, "envctl: %s: %s: %s%s\n", what, ka_error_code_name(r->error->code),
            r->error->message, r->error->retryable ? " (retryable)" : "");
  else
    fprintf(stderr, "envctl: %s: unexpected response\n", what);
  return 1;
}

/* The task folder: --tasks, else ./tasks, else <source tree>/tasks found from the
 * executable (build/bin/envctl -> ../../tasks). */
static const char *ec_tasks_dir(const char *given, char *buf, size_t len) {
  if (given) return given;
  struct stat st;
  if (stat("tasks", &st) == 0 && S_ISDIR(st.st_mode)) return "tasks";
  char exe[PATH_MAX];
  if (ka_exe_dir(exe, sizeof exe) == KA_OK) {
    snprintf(buf, len, "%s/../../tasks", exe);
    if (stat(buf, &st) == 0 && S_ISDIR(st.st_mode)) {
      char *r = realpath(buf, NULL);
      if (r) {
        snprintf(buf, len, "%s", r);
        free(r);
      }
      return buf;
    }
  }
  return "tasks";
}

static pid_t ec_spawn(char *const argv[], int quiet) {
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
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
  if (!keep && emb->state[0]) ka_rmtree(emb->state);
}

/* One line of the task table (the header when id is NULL); lists are joined with commas. */
static void ec_task_row(const char *id, const char *type, const char *lang, const char *mode,
                        char *const *backends, size_t nbackends, char *const *tags, size_t ntags,
                        int shown, int held) {
  if (!id) {
    printf("%-26s %-10s %-5s %-7s %-10s %-7s %s\n", "TASK", "TYPE", "LANG", "MODE", "BACKENDS",
           "CASES", "TAGS");
    return;
  }
  char be[64] = "", tg[256] = "", cases[32];
  for (size_t b = 0; b < nbackends; b++)
    snprintf(be + strlen(be), sizeof be - strlen(be), "%s%s", b ? "," : "", backends[b]);
  for (size_t g = 0; g < ntags; g++)
    snprintf(tg + strlen(tg), sizeof tg - strlen(tg), "%s%s", g ? "," : "", tags[g]);
  snprintf(cases, sizeof cases, "%d+%d", shown, held);
  printf("%-26s %-10s %-5s %-7s %-10s %-7s %s\n", id, type, lang, mode, be, cases, tg);
}

static int ec_tasks_local(const char *dir) {
  char err[1024];
  ka_registry *r;
  if (ka_registry_load(dir, 1, &r, err, sizeof err)) {
    fprintf(stderr, "envctl: %s\n", err);
    return 1;
  }
  ec_task_row(NULL, NULL, NULL, NULL, NULL, 0, NULL, 0, 0, 0);
  for (int i = 0; i < r->ntasks; i++) {
    const ka_task *t = r->tasks[i];
    ec_task_row(t->id, t->type, t->language, t->mode, t->backends, (size_t)t->nbackends, t->tags,
                (size_t)t->ntags, t->ncases, t->nheld);
  }
  ka_registry_free(r);
  return 0;
}

static int ec_tasks_remote(ka_client *c, int timeout_ms) {
  Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__ListTasksRequest lt = KERNELARENA__V1__LIST_TASKS_REQUEST__INIT;
  req.body_case = KERNELARENA__V1__REQUEST__BODY_LIST_TASKS;
  req.list_tasks = &lt;
  Kernelarena__V1__Response *r;
  char err[512];
  if (ka_client_call(c, &req, timeout_ms, &r, err, sizeof err)) {
    fprintf(stderr, "envctl: tasks: %s\n", err);
    return 1;
  }
  if (r->body_case != KERNELARENA__V1__RESPONSE__BODY_LIST_TASKS) {
    ec_print_error("tasks", r);
    ka_client_free_response(r);
    return 1;
  }
  ec_task_row(NULL, NULL, NULL, NULL, NULL, 0, NULL, 0, 0, 0);
  for (size_t i = 0; i < r->list_tasks->n_tasks; i++) {
    Kernelarena__V1__TaskInfo *t = r->list_tasks->tasks[i];
    ec_task_row(t->id, t->type, t->language, t->mode, t->backends, t->n_backends, t->tags,
                t->n_tags, t->shown_cases, t->held_out_cases);
  }
  ka_client_free_response(r);
  return 0;
}

static int ec_health(ka_client *c, int timeout_ms) {
  Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__HealthRequest h = KERNELARENA__V1__HEALTH_REQUEST__INIT;
  req.body_case = KERNELARENA__V1__REQUEST__BODY_HEALTH;
  req.health = &h;
  Kernelarena__V1__Response *r;
  char err[512];
  if (ka_client_call(c, &req, timeout_ms, &r, err, sizeof err)) {
    fprintf(stderr, "envctl: health: %s\n", err);
    return 1;
  }
  if (r->body_case != KERNELARENA__V1__RESPONSE__BODY_HEALTH) {
    ec_print_error("health", r);
    ka_client_free_response(r);
    return 1;
  }
  printf("ok=%d executors=%d queued=%d running=%d open_episodes=%d uptime_s=%.1f\n", r->health->ok,
         r->health->executors, r->health->queued_jobs, r->health->running_jobs,
         r->health->open_episodes, r->health->uptime_s);
  ka_client_free_response(r);
  return 0;
}

static volatile sig_atomic_t ec_interrupted;
static void ec_on_signal(int sig) {
  ec_interrupted = sig;
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    ec_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "validate")) return ec_validate(argc - 1, argv + 1);
  if (!strcmp(cmd, "step")) return ec_step_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "mcp")) return ec_mcp_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "agent")) return ec_agent_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "run")) return ec_run_main(argc - 1, argv + 1);
  int ec_export_main(int, char **), ec_replay_main(int, char **); /* export.c, replay.c */
  if (!strcmp(cmd, "export")) return ec_export_main(argc, argv);
  if (!strcmp(cmd, "replay")) return ec_replay_main(argc, argv);
  int ec_compare_main(int, char **), ec_report_main(int, char **); /* compare.c, report.c */
  if (!strcmp(cmd, "compare")) return ec_compare_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "report")) return ec_report_main(argc - 1, argv + 1);
  static const struct option opts[] = {{"server", required_argument, 0, 's'},
                                       {"tasks", required_argument, 0, 'T'},
                                       {"backends", required_argument, 0, 'b'},
                                       {"task", required_argument, 0, 't'},
                                       {"agent", required_argument, 0, 'a'},
                                       {"max-steps", required_argument, 0, 'n'},
                                       {"seed", required_argument, 0, 'S'},
                                       {"workspace", required_argument, 0, 'w'},
                                       {"timeout", required_argument, 0, 'o'},
                                       {"agent-timeout", required_argument, 0, 'A'},
                                       {"verbose", no_argument, 0, 'v'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  ec_opts o = {.agent = "baseline", .max_steps = 1, .timeout_s = 900, .agent_timeout_s = 600};
  int c;
  optind = 2;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    char *end;
    switch (c) {
      case 's':
        o.server = optarg;
        break;
      case 'T':
        o.tasks = optarg;
        break;
      case 'b':
        o.backends = optarg;
        break;
      case 't':
        o.task = optarg;
        break;
      case 'a':
        o.agent = optarg;
        break;
      case 'w':
        o.workspace = optarg;
        break;
      case 'v':
        o.verbose = 1;
        break;
      case 'n':
      case 'o':
      case 'A': {
        errno = 0;
        long v = strtol(optarg, &end, 10);
        if (end == optarg || *end || errno == ERANGE || v < 1 || v > INT_MAX) {
          fprintf(stderr, "envctl: --%s needs a positive integer (at most %d)\n",
                  c == 'n'   ? "max-steps"
                  : c == 'o' ? "timeout"
                             : "agent-timeout",
                  INT_MAX);
          return 2;
        }
        if (c == 'n')
          o.max_steps = (int)v;
        else if (c == 'o')
          o.timeout_s = (int)v;
        else
          o.agent_timeout_s = (int)v;
        break;
      }
      case 'S':
        errno = 0;
        o.seed = strtoull(optarg, &end, 0);
        if (end == optarg || *end || errno == ERANGE || strchr(optarg, '-')) {
          fprintf(stderr, "envctl: --seed needs an integer from 0 to 2^64-1\n");
          return 2;
        }
        o.has_seed = 1;
        break;
      case 'h':
        ec_usage(stdout);
        return 0;
      default:
        ec_usage(stderr);
        return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "envctl: unexpected argument '%s'\n", argv[optind]);
    return 2;
  }
  char tbuf[PATH_MAX];
  o.tasks = ec_tasks_dir(o.tasks, tbuf, sizeof tbuf);
  int is_tasks = !strcmp(cmd, "tasks"), is_ep = !strcmp(cmd, "episode"),
      is_health = !strcmp(cmd, "health");
  if (!is_tasks && !is_ep && !is_health) {
    fprintf(stderr, "envctl: unknown command '%s'\n", cmd);
    ec_usage(stderr);
    return 2;
  }
  if (is_tasks && !o.server) return ec_tasks_local(o.tasks);
  if (is_health && !o.server) {
    fprintf(stderr, "envctl: health needs --server URL\n");
    return 2;
  }
  if (is_ep && !o.task) {
    fprintf(stderr, "envctl: episode needs --task ID (see `envctl tasks`)\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  struct sigaction sa = {.sa_handler = ec_on_signal};
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  char err[1024];
  ec_embedded emb = {0};
  const char *url = o.server;
  if (!url) {
    fprintf(stderr, "envctl: starting envserver and gpuexec (tasks: %s)...\n", o.tasks);
    if (ec_embedded_start(&o, &emb, err, sizeof err)) {
      fprintf(stderr, "envctl: %s\n", err);
      return 1;
    }
    url = emb.url;
  }
  ka_client *cl;
  int rc;
  if (ka_client_open(url, &cl, err, sizeof err)) {
    fprintf(stderr, "envctl: %s\n", err);
    rc = 1;
  } else {
    if (is_tasks)
      rc = ec_tasks_remote(cl, o.timeout_s * 1000);
    else if (is_health)
      rc = ec_health(cl, o.timeout_s * 1000);
    else
      rc = ec_episode(cl, &o);
    ka_client_close(cl);
  }
  if (!o.server) ec_embedded_stop(&emb, 0);
  return rc;
}
