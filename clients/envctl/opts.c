/* The options of envctl tasks, health and episode, and the server they talk to
 * (envctl.h: ec_opts_parse, ec_with_server). */
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "envctl.h"
#include "ka_common.h"
#include "ka_opt.h"

int ec_opts_common(int c, const char *arg, ec_opts *o) {
  switch (c) {
    case 's':
      o->server = arg;
      return 1;
    case 'T':
      o->tasks = arg;
      return 1;
    case 'b':
      o->backends = arg;
      return 1;
    case 'v':
      o->verbose = 1;
      return 1;
    default:
      return 0;
  }
}

int ec_opts_parse(int argc, char **argv, ec_opts *o) {
  static const struct option opts[] = {{"server", required_argument, 0, 's'},
                                       {"task", required_argument, 0, 't'},
                                       {"agent", required_argument, 0, 'a'},
                                       {"max-steps", required_argument, 0, 'n'},
                                       {"seed", required_argument, 0, 'S'},
                                       {"workspace", required_argument, 0, 'w'},
                                       {"timeout", required_argument, 0, 'o'},
                                       {"agent-timeout", required_argument, 0, 'A'},
                                       EC_OPTS_COMMON,
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  *o = (ec_opts){.agent = "baseline",
                 .max_steps = 1,
                 .timeout_s = KA_OPT_REQUEST_TIMEOUT_S,
                 .agent_timeout_s = KA_OPT_EPISODE_AGENT_TIMEOUT_S};
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    if (ec_opts_common(c, optarg, o)) continue;
    switch (c) {
      case 't':
        o->task = optarg;
        break;
      case 'a':
        o->agent = optarg;
        break;
      case 'w':
        o->workspace = optarg;
        break;
      case 'n':
        if (ka_opt_int("envctl", "max-steps", optarg, 1, INT_MAX, &o->max_steps)) return 2;
        break;
      case 'o':
        if (ka_opt_timeout_s("envctl", "timeout", optarg, &o->timeout_s)) return 2;
        break;
      case 'A':
        if (ka_opt_timeout_s("envctl", "agent-timeout", optarg, &o->agent_timeout_s)) return 2;
        break;
      case 'S': {
        uint64_t seed;
        if (ka_opt_u64("envctl", "seed", optarg, &seed)) return 2;
        o->seed = seed;
        o->has_seed = 1;
        break;
      }
      case 'h':
        return EC_EXIT_HELP;
      default:
        return EC_EXIT_USAGE;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "envctl: unexpected argument '%s'\n", argv[optind]);
    return 2;
  }
  o->tasks = ka_tasks_dir(o->tasks, o->tasks_buf, sizeof o->tasks_buf);
  return -1;
}

/* SIGINT/SIGTERM end envctl at once, with the shell's status for the signal, and take
 * the embedded envserver and gpuexec with them (a request in flight is abandoned: a
 * server keeps that episode until its lease expires). Commands that stop more gently
 * (agent episodes, agent.c) install their own handler. */
static void ec_on_signal(int sig) {
  ec_embedded_kill_all();
  _exit(128 + sig);
}

int ec_with_server(const ec_opts *o, int (*fn)(ka_client *, const ec_opts *)) {
  signal(SIGPIPE, SIG_IGN);
  struct sigaction sa = {.sa_handler = ec_on_signal};
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  char err[1024];
  ec_embedded emb = {0};
  const char *url = o->server;
  if (!url) {
    fprintf(stderr, "envctl: starting envserver and gpuexec (tasks: %s)...\n", o->tasks);
    if (ec_embedded_start(o, &emb, err, sizeof err)) {
      fprintf(stderr, "envctl: %s\n", err);
      return 1;
    }
    url = emb.url;
  }
  ka_client *cl;
  int rc;
  /* a given server must answer within KA_OPT_CONNECT_TIMEOUT_S (ec_server_open); the
   * embedded one is up already */
  if (o->server ? ec_server_open(url, o->timeout_s, &cl, err, sizeof err)
                : ka_client_open(url, &cl, err, sizeof err)) {
    fprintf(stderr, "envctl: %s\n", err);
    rc = 1;
  } else {
    rc = fn(cl, o);
    ka_client_close(cl);
  }
  if (!o->server) ec_embedded_stop(&emb, 0);
  return rc;
}
