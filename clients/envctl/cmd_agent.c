/* envctl agent --task ID --adapter NAME ...: one episode with a coding-agent adapter
 * (docs/agents.md); the episode itself is ec_agent_episode (agent.c). */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "agents.h"
#include "envctl.h"
#include "ka_common.h"
#include "ka_opt.h"

/* Sets key=value in an agent config object (value parsed as YAML would be: integers
 * and booleans become numbers and booleans, except for the settings that are always
 * text, e.g. command=true is the shell command `true`). */
int ec_cfg_set(json_t *cfg, const char *kv) {
  const char *eq = strchr(kv, '=');
  if (!eq || eq == kv) return KA_EINVAL;
  char *key = strndup(kv, (size_t)(eq - kv));
  const char *v = eq + 1;
  char *end;
  long long n = strtoll(v, &end, 10);
  json_t *jv;
  /* settings that are always text, whatever they look like ("command=true") */
  static const char *const text_keys[] = {"command", "bin",    "model",          "effort",
                                          "replay",  "reward", "replay_episode", NULL};
  int text = 0;
  for (int i = 0; text_keys[i] && !text; i++) text = !strcmp(key, text_keys[i]);
  if (text)
    jv = json_string(v);
  else if (*v && !*end)
    jv = json_integer(n);
  else if (!strcmp(v, "true") || !strcmp(v, "false"))
    jv = json_boolean(!strcmp(v, "true"));
  else
    jv = json_string(v);
  json_object_set_new(cfg, key, jv);
  free(key);
  return KA_OK;
}

/* The options of `envctl agent` (ec_agent_parse). */
typedef struct ec_agent_args {
  json_t *cfg;            /* the agent config: --adapter, --config, --set; owned */
  const char *token_file; /* --admin-token-file; NULL: KA_ADMIN_TOKEN */
  const char *out;        /* --out DIR; NULL: a new temporary folder */
  ec_episode_req rq;      /* the episode: --task, --seed, --max-steps, ... */
  ec_opts o;              /* --server, --tasks and the other common options */
} ec_agent_args;

/* Merges the agent config of the YAML file path (its agent: mapping, else the whole
 * file) into cfg. Returns 0, or 2 after printing why: unreadable or not a mapping. */
static int ec_agent_load_config(json_t *cfg, const char *path) {
  char err[1024];
  json_t *y = ec_yaml_load(path, err, sizeof err);
  json_t *a = json_object_get(y, "agent");
  if (!json_is_object(a)) a = y;
  if (!json_is_object(a)) {
    fprintf(stderr, "envctl agent: %s\n", y ? "the config is not a mapping" : err);
    json_decref(y);
    return 2;
  }
  json_object_update(cfg, a);
  json_decref(y);
  return 0;
}

/* Parses the options of `envctl agent` into a (a->cfg made, a->rq holding its
 * defaults); prints the usage for --help. Returns -1 to go on, else the exit code: 0
 * after --help, 2 for a bad option, a missing --task or an extra argument. */
static int ec_agent_parse(int argc, char **argv, ec_agent_args *a) {
  static const struct option opts[] = {{"task", required_argument, 0, 't'},
                                       {"adapter", required_argument, 0, 'a'},
                                       {"config", required_argument, 0, 'c'},
                                       {"set", required_argument, 0, 'x'},
                                       {"out", required_argument, 0, 'O'},
                                       {"seed", required_argument, 0, 'S'},
                                       {"max-steps", required_argument, 0, 'n'},
                                       {"reward", required_argument, 0, 'r'},
                                       {"timeout", required_argument, 0, 'o'},
                                       {"held-out", no_argument, 0, 'H'},
                                       {"admin-token-file", required_argument, 0, 'A'},
                                       EC_OPTS_COMMON,
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  uint64_t seed;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    if (ec_opts_common(c, optarg, &a->o)) continue;
    switch (c) {
      case 't':
        a->rq.task = optarg;
        break;
      case 'a':
        json_object_set_new(a->cfg, "adapter", json_string(optarg));
        break;
      case 'c':
        if (ec_agent_load_config(a->cfg, optarg)) return 2;
        break;
      case 'x':
        if (ec_cfg_set(a->cfg, optarg)) {
          fprintf(stderr, "envctl agent: --set needs KEY=VALUE\n");
          return 2;
        }
        break;
      case 'O':
        a->out = optarg;
        break;
      case 'S':
        if (ka_opt_u64("envctl agent", "seed", optarg, &seed)) return 2;
        a->rq.seed = seed;
        a->rq.has_seed = 1;
        break;
      case 'n':
        if (ka_opt_int("envctl agent", "max-steps", optarg, 1, 1000000, &a->rq.max_steps)) return 2;
        break;
      case 'r':
        a->rq.reward = optarg;
        break;
      case 'o':
        if (ka_opt_timeout_s("envctl agent", "timeout", optarg, &a->rq.timeout_s)) return 2;
        break;
      case 'H':
        a->rq.held_out = 1;
        break;
      case 'A':
        a->token_file = optarg;
        break;
      case 'h':
        printf(
            "usage: envctl agent --task ID --adapter NAME [--config FILE] [--set KEY=VALUE]...\n"
            "                    [--out DIR] [--seed S] [--max-steps N] [--reward last|best]\n"
            "                    [--held-out [--admin-token-file PATH]]\n"
            "                    [--server URL] [--tasks DIR] [--backends LIST]\n"
            "                    [--timeout S] [--verbose]\n"
            "Runs one episode with a coding-agent adapter (claude_code, codex, cursor, command,\n"
            "replay) and writes DIR/episode.json, the transcript and every step's files.\n"
            "See docs/agents.md.\n");
        return 0;
      default:
        return 2;
    }
  }
  if (!a->rq.task || optind < argc) {
    fprintf(stderr, "envctl agent: %s\n",
            optind < argc ? "unexpected argument" : "needs --task ID (see `envctl tasks`)");
    return 2;
  }
  return -1;
}

/* Makes the episode folder: out, or when NULL a new $TMPDIR/kernelarena-agent-XXXXXX
 * (default /tmp), and writes its absolute path into absout (PATH_MAX bytes). Returns 0,
 * or 1 after printing why the temporary folder could not be made. */
static int ec_agent_out_dir(const char *out, char *absout) {
  char outbuf[PATH_MAX];
  if (!out) {
    const char *tmp = getenv("TMPDIR");
    snprintf(outbuf, sizeof outbuf, "%s/kernelarena-agent-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(outbuf)) {
      perror("mkdtemp");
      return 1;
    }
    out = outbuf;
  }
  ka_mkdirs(out);
  if (!realpath(out, absout)) snprintf(absout, PATH_MAX, "%s", out);
  return 0;
}

/* The admin token for --held-out: with --server from --admin-token-file (or
 * KA_ADMIN_TOKEN), embedded from admin.token in the server's state folder emb->state.
 * Returns the token (the caller wipes and frees it), or NULL after printing why. */
static char *ec_agent_admin_token(const ec_agent_args *a, const ec_embedded *emb) {
  char err[1024], tp[PATH_MAX];
  snprintf(tp, sizeof tp, "%s/admin.token", emb->state);
  char *token = ec_admin_token_load(a->o.server ? a->token_file : tp, err, sizeof err);
  if (!token) fprintf(stderr, "envctl agent: held-out scoring: %s\n", err);
  return token;
}

/* Prints the held-out line of an episode result's held_out object ho on stdout: status,
 * speedup, gap and the error or reason when present. */
static void ec_agent_print_held_out(const json_t *ho) {
  json_t *hs = json_object_get(ho, "speedup_geomean"), *gap = json_object_get(ho, "gap");
  const char *why = json_string_value(json_object_get(ho, "error"));
  if (!why) why = json_string_value(json_object_get(ho, "reason"));
  printf("held-out: %s", json_string_value(json_object_get(ho, "status")));
  if (json_is_number(hs)) printf(", speedup %.3fx", json_number_value(hs));
  if (json_is_number(gap)) printf(", gap %.3f (held-out / shown speedup)", json_number_value(gap));
  if (why) printf(" (%s)", why);
  printf("\n");
}

/* Prints the episode result res of task (adapter from cfg) on stdout, its error on
 * stderr, and the path of episode.json in absout. Returns the exit code: 1 when the
 * episode ended in error or was interrupted, else 0. */
static int ec_agent_print_result(const json_t *res, const char *task, const json_t *cfg,
                                 const char *absout) {
  const char *st = json_string_value(json_object_get(res, "status"));
  printf("episode %s: task %s, adapter %s, %s, %d step%s, reward %.2f (%s step: %lld)\n",
         json_string_value(json_object_get(res, "episode_id"))
             ? json_string_value(json_object_get(res, "episode_id"))
             : "-",
         task, ka_cfg_str(cfg, "adapter", "command"), st,
         (int)json_integer_value(json_object_get(res, "n_steps")),
         json_integer_value(json_object_get(res, "n_steps")) == 1 ? "" : "s",
         json_number_value(json_object_get(res, "reward")),
         json_string_value(json_object_get(res, "reward_mode")),
         (long long)json_integer_value(json_object_get(res, "scored_step")));
  if (json_is_string(json_object_get(res, "error")))
    fprintf(stderr, "envctl agent: %s\n", json_string_value(json_object_get(res, "error")));
  json_t *ho = json_object_get(res, "held_out");
  if (json_is_object(ho)) ec_agent_print_held_out(ho);
  printf("results: %s/episode.json\n", absout);
  return !strcmp(st, "error") || !strcmp(st, "interrupted") ? 1 : 0;
}

/* Runs the episode of a against the server at url (emb: the embedded server, zeroed
 * with --server): opens a client, makes the episode folder once the server answers,
 * loads the admin token for --held-out into *token, runs and prints the episode.
 * Returns the exit code: 1 when the server is unreachable or the folder cannot be
 * made, else that of ec_agent_print_result. */
static int ec_agent_run(ec_agent_args *a, const char *url, const ec_embedded *emb, char **token) {
  char err[1024];
  /* the server answers before --out is made: an unreachable one leaves nothing behind */
  ka_client *cl;
  if (ec_server_open(url, a->rq.timeout_s, &cl, err, sizeof err)) {
    fprintf(stderr, "envctl agent: %s\n", err);
    return 1;
  }
  char absout[PATH_MAX];
  if (ec_agent_out_dir(a->out, absout)) {
    ka_client_close(cl);
    return 1;
  }
  a->rq.out_dir = absout;
  if (a->rq.held_out) {
    *token = ec_agent_admin_token(a, emb);
    a->rq.admin_token = *token;
  }
  json_t *res = ec_agent_episode(cl, a->cfg, &a->rq);
  ka_client_close(cl);
  int rc = ec_agent_print_result(res, a->rq.task, a->cfg, absout);
  json_decref(res);
  return rc;
}

/* `envctl agent`: parses the options, checks the agent can run, starts an embedded
 * envserver and gpuexec unless --server is given, and runs one episode. Returns the
 * exit code: 0 done, 1 server, start or episode failure, 2 usage or config error. */
int cmd_agent(int argc, char **argv) {
  ec_agent_args a = {.cfg = json_object(),
                     .rq = {.timeout_s = KA_OPT_REQUEST_TIMEOUT_S, .run = "default"}};
  char *token = NULL;
  char err[1024];
  int rc = ec_agent_parse(argc, argv, &a);
  if (rc >= 0) goto out;
  rc = 2;
  /* before any request and before --out is made: nothing is recorded */
  if (ka_adapter_check(a.cfg, err, sizeof err)) {
    fprintf(stderr, "envctl agent: %s\n", err);
    goto out;
  }
  char tbuf[PATH_MAX];
  a.o.tasks = ka_tasks_dir(a.o.tasks, tbuf, sizeof tbuf);
  ec_agent_install_signals();
  ec_embedded emb = {0};
  const char *url = a.o.server;
  if (!url) {
    if (ec_embedded_start(&a.o, &emb, err, sizeof err)) {
      fprintf(stderr, "envctl agent: %s\n", err);
      rc = 1;
      goto out;
    }
    url = emb.url;
  }
  rc = ec_agent_run(&a, url, &emb, &token);
  if (!a.o.server) ec_embedded_stop(&emb, 0);
out:
  if (token) memset(token, 0, strlen(token));
  free(token);
  json_decref(a.cfg);
  return rc;
}
