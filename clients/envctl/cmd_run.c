/* `envctl run --config FILE [--resume RUN]`: every selected task x repeat as one agent
 * episode, several in parallel, into runs/<RUN>/ (docs/agents.md: run configs and the run
 * folder). A run that was interrupted is finished by --resume without repeating the
 * episodes that have a final result. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "agents.h"
#include "envctl.h"
#include "ka_common.h"
#include "ka_opt.h"

typedef struct ec_run {
  const char *dir; /* runs/<RUN>, absolute */
  const char *url;
  const json_t *cfg; /* the whole config */
  json_t *plan;      /* [{task, repeat, seed, dir}] */
  pthread_mutex_t mu;
  size_t next; /* next plan index to start */
  int done, failed, skipped, running, total;
  double reward_sum;
  int tty;
  int timeout_s;
  const char *admin_token; /* held-out scoring; NULL: none */
} ec_run;

/* Seed of (task, repeat) under a base seed: FNV-1a 64 of the task id mixed with the
 * repeat index (FNV: http://www.isthe.com/chongo/tech/comp/fnv/), so two runs of the
 * same config give each task and repeat the same episode seed (paired comparisons). */
static unsigned long long ec_episode_seed(unsigned long long base, const char *task, int repeat) {
  unsigned long long h = 1469598103934665603ULL;
  for (const char *p = task; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
  h ^= base + 0x9e3779b97f4a7c15ULL * (unsigned long long)(repeat + 1);
  h ^= h >> 31;
  return h & 0x7fffffffffffffffULL;
}

/* 1 if task matches one selector: "all" or "*", an exact id, or any parent folder of
 * the id given as "a/b", "a/b/" or "a/b/" followed by "*" (a family is the first level;
 * command tasks nest deeper, e.g. triton2triton/vllm/NAME). */
static int ec_task_selected(const char *task, const json_t *sel) {
  size_t i;
  json_t *v;
  json_array_foreach(sel, i, v) {
    const char *s = json_string_value(v);
    if (!s) continue;
    if (!strcmp(s, "all") || !strcmp(s, "*") || !strcmp(s, task)) return 1;
    size_t n = strlen(s);
    if (n >= 2 && !strcmp(s + n - 2, "/*"))
      n -= 2;
    else if (n >= 1 && s[n - 1] == '/')
      n -= 1;
    if (n && !memchr(s, '*', n) && !strncmp(task, s, n) && task[n] == '/') return 1;
  }
  return 0;
}

/* The task ids of the server (ListTasks), in its order. */
static json_t *ec_server_tasks(ka_client *c, char *err, size_t errlen) {
  Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__ListTasksRequest lt = KERNELARENA__V1__LIST_TASKS_REQUEST__INIT;
  req.body_case = KERNELARENA__V1__REQUEST__BODY_LIST_TASKS;
  req.list_tasks = &lt;
  Kernelarena__V1__Response *r;
  if (ka_client_call(c, &req, 30000, &r, err, errlen)) return NULL;
  if (r->body_case != KERNELARENA__V1__RESPONSE__BODY_LIST_TASKS) {
    ka_seterr(err, errlen, KA_EUNAVAIL, "ListTasks refused");
    ka_client_free_response(r);
    return NULL;
  }
  json_t *out = json_array();
  for (size_t i = 0; i < r->list_tasks->n_tasks; i++)
    json_array_append_new(out, json_string(r->list_tasks->tasks[i]->id));
  ka_client_free_response(r);
  return out;
}

/* Live executors (Health), at least 1. */
static int ec_server_executors(ka_client *c) {
  Kernelarena__V1__Response *r;
  char err[256];
  int n = 1;
  if (ec_health_call(c, 10000, &r, err, sizeof err) == KA_OK) {
    if (r->body_case == KERNELARENA__V1__RESPONSE__BODY_HEALTH && r->health->executors > 1)
      n = r->health->executors;
    ka_client_free_response(r);
  }
  return n;
}

/* A final result exists for the episode folder (resume skips it): completed, no_steps
 * or error with a reset refusal are final; interrupted or missing are not. */
static json_t *ec_finished_result(const char *dir) {
  char p[PATH_MAX + 32];
  snprintf(p, sizeof p, "%s/episode.json", dir);
  json_error_t je;
  json_t *r = json_load_file(p, 0, &je);
  const char *st = json_string_value(json_object_get(r, "status"));
  if (st && (!strcmp(st, "completed") || !strcmp(st, "no_steps"))) return r;
  json_decref(r);
  return NULL;
}

static void ec_progress(ec_run *r, const json_t *res, const char *task, int repeat) {
  /* caller holds r->mu */
  int finished = r->done + r->skipped;
  double mean = r->done ? r->reward_sum / r->done : 0;
  if (r->tty) {
    int width = 30, fill = r->total ? finished * width / r->total : width;
    fprintf(stderr, "\r[%.*s%*s] %d/%d episodes, %d running, %d failed, mean reward %.1f ", fill,
            "##############################", width - fill, "", finished, r->total, r->running,
            r->failed, mean);
    if (finished == r->total) fputc('\n', stderr);
  } else if (res) {
    fprintf(stderr, "[%d/%d] %s #%d: %s, reward %.2f, %lld steps\n", finished, r->total, task,
            repeat, json_string_value(json_object_get(res, "status")),
            json_number_value(json_object_get(res, "reward")),
            (long long)json_integer_value(json_object_get(res, "n_steps")));
  }
  fflush(stderr);
}

/* The client is opened only once there is an episode to run: a connection closed before
 * its first request (a worker with nothing left to do) can hit nng 1.5.2's listener bug
 * (nanomsg/nng#1518: a peer that disconnects during the connection handshake stops the
 * server's listener for good, and every later client hangs). */
static void *ec_run_worker(void *arg) {
  ec_run *r = arg;
  char err[512];
  ka_client *c = NULL;
  const json_t *agent = json_object_get(r->cfg, "agent");
  for (;;) {
    pthread_mutex_lock(&r->mu);
    if (ec_agent_interrupted || r->next >= json_array_size(r->plan)) {
      pthread_mutex_unlock(&r->mu);
      break;
    }
    json_t *e = json_array_get(r->plan, r->next++);
    r->running++;
    pthread_mutex_unlock(&r->mu);
    if (!c && ka_client_open(r->url, &c, err, sizeof err)) {
      fprintf(stderr, "envctl run: %s\n", err); /* the episode stays unfinished (a failure) */
      pthread_mutex_lock(&r->mu);
      r->running--;
      pthread_mutex_unlock(&r->mu);
      return NULL;
    }
    const char *task = json_string_value(json_object_get(e, "task"));
    int repeat = (int)json_integer_value(json_object_get(e, "repeat"));
    ec_episode_req rq = {
        .task = task,
        .has_seed = 1,
        .seed = (unsigned long long)json_integer_value(json_object_get(e, "seed")),
        .run = json_string_value(json_object_get(r->cfg, "run")),
        .label = json_string_value(json_object_get(r->cfg, "label")),
        .repeat = repeat,
        .out_dir = json_string_value(json_object_get(e, "dir")),
        .max_steps = (int)json_integer_value(json_object_get(r->cfg, "max_steps")),
        .reward = json_string_value(json_object_get(r->cfg, "reward")),
        .held_out = json_is_true(json_object_get(r->cfg, "held_out")),
        .admin_token = r->admin_token,
        .timeout_s = r->timeout_s,
    };
    json_t *res = ec_agent_episode(c, agent, &rq);
    const char *st = json_string_value(json_object_get(res, "status"));
    pthread_mutex_lock(&r->mu);
    r->running--;
    if (strcmp(st, "interrupted")) {
      r->done++;
      r->reward_sum += json_number_value(json_object_get(res, "reward"));
      if (strcmp(st, "completed") || !json_is_true(json_object_get(res, "correct"))) r->failed++;
      char p[PATH_MAX];
      snprintf(p, sizeof p, "%s/results.jsonl", r->dir);
      FILE *f = fopen(p, "a");
      if (f) {
        json_t *line = json_pack(
            "{s:s, s:i, s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:O}", "task", task, "repeat", repeat,
            "status", json_object_get(res, "status"), "reward", json_object_get(res, "reward"),
            "correct", json_object_get(res, "correct"), "speedup", json_object_get(res, "speedup"),
            "n_steps", json_object_get(res, "n_steps"), "episode_id",
            json_object_get(res, "episode_id") ? json_object_get(res, "episode_id") : json_null(),
            "seed", json_object_get(e, "seed"), "dir", json_object_get(e, "dir"));
        json_dumpf(line, f, JSON_COMPACT);
        fputc('\n', f);
        fclose(f);
        json_decref(line);
      }
    }
    ec_progress(r, res, task, repeat);
    pthread_mutex_unlock(&r->mu);
    json_decref(res);
  }
  ka_client_close(c);
  return NULL;
}

/* Aggregates the episode.json of every planned episode into summary.json; episodes
 * without a final result count as failures with reward 0 (never left out). */
static json_t *ec_run_summary(const ec_run *r) {
  size_t i;
  json_t *e, *tasks = json_object();
  int n = 0, failed = 0, correct = 0;
  double rsum = 0, lsum = 0;
  int nlog = 0;
  json_array_foreach(r->plan, i, e) {
    const char *task = json_string_value(json_object_get(e, "task"));
    json_t *res = ec_finished_result(json_string_value(json_object_get(e, "dir")));
    double reward = res ? json_number_value(json_object_get(res, "reward")) : 0;
    int ok = res && !strcmp(json_string_value(json_object_get(res, "status")), "completed") &&
             json_is_true(json_object_get(res, "correct"));
    json_t *sp = json_object_get(res, "speedup");
    n++;
    rsum += reward;
    failed += !ok;
    correct += ok;
    if (ok && json_is_number(sp) && json_number_value(sp) > 0) {
      lsum += log(json_number_value(sp));
      nlog++;
    }
    json_t *t = json_object_get(tasks, task);
    if (!t) {
      t = json_pack("{s:i, s:i, s:f, s:[]}", "episodes", 0, "failed", 0, "reward_sum", 0.0,
                    "rewards");
      json_object_set_new(tasks, task, t);
    }
    json_object_set_new(t, "episodes",
                        json_integer(json_integer_value(json_object_get(t, "episodes")) + 1));
    json_object_set_new(t, "failed",
                        json_integer(json_integer_value(json_object_get(t, "failed")) + !ok));
    json_array_append_new(json_object_get(t, "rewards"), json_real(reward));
    json_decref(res);
  }
  const char *k;
  json_object_foreach(tasks, k, e) {
    double s = 0;
    size_t j;
    json_t *v;
    json_array_foreach(json_object_get(e, "rewards"), j, v) s += json_number_value(v);
    json_object_set_new(e, "mean_reward",
                        json_real(s / (double)json_array_size(json_object_get(e, "rewards"))));
    json_object_del(e, "reward_sum");
  }
  return json_pack("{s:s, s:O, s:O, s:i, s:i, s:i, s:f, s:o, s:o}", "schema",
                   "kernelarena.run-summary.v1", "run", json_object_get(r->cfg, "run"), "label",
                   json_object_get(r->cfg, "label"), "episodes", n, "correct", correct, "failed",
                   failed, "mean_reward", n ? rsum / n : 0.0, "geomean_speedup_correct",
                   nlog ? json_real(exp(lsum / nlog)) : json_null(), "tasks", tasks);
}

/* The options of `envctl run` (ec_run_parse). */
typedef struct ec_run_args {
  const char *config;     /* --config FILE; NULL with --resume */
  const char *resume;     /* --resume RUN; NULL with --config */
  const char *runs_dir;   /* --runs-dir, default "runs" */
  const char *token_file; /* --admin-token-file; NULL: KA_ADMIN_TOKEN */
  int jobs;               /* --jobs, 1..64; 0: the config's parallel, else the executors */
  int timeout_s;          /* --timeout, seconds */
  ec_opts o;              /* --server, --tasks and the other common options */
} ec_run_args;

/* Parses the options of `envctl run` into a (whose runs_dir and timeout_s hold their
 * defaults); prints the usage for --help. Returns -1 to go on, else the exit code: 0
 * after --help, 2 for a bad option or neither or both of --config and --resume. */
static int ec_run_parse(int argc, char **argv, ec_run_args *a) {
  static const struct option opts[] = {{"config", required_argument, 0, 'c'},
                                       {"resume", required_argument, 0, 'R'},
                                       {"runs-dir", required_argument, 0, 'd'},
                                       {"jobs", required_argument, 0, 'j'},
                                       {"timeout", required_argument, 0, 'o'},
                                       {"admin-token-file", required_argument, 0, 'A'},
                                       EC_OPTS_COMMON,
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    if (ec_opts_common(c, optarg, &a->o)) continue;
    switch (c) {
      case 'c':
        a->config = optarg;
        break;
      case 'R':
        a->resume = optarg;
        break;
      case 'd':
        a->runs_dir = optarg;
        break;
      case 'j':
        if (ka_opt_int("envctl run", "jobs", optarg, 1, 64, &a->jobs)) return 2;
        break;
      case 'o':
        if (ka_opt_timeout_s("envctl run", "timeout", optarg, &a->timeout_s)) return 2;
        break;
      case 'A':
        a->token_file = optarg;
        break;
      case 'h':
        printf(
            "usage: envctl run --config FILE [--runs-dir DIR] [--jobs N] [--server URL]\n"
            "       envctl run --resume RUN  [--runs-dir DIR] [--jobs N] [--server URL]\n"
            "       (held_out: true with --server: --admin-token-file PATH or KA_ADMIN_TOKEN)\n"
            "Runs every selected task x repeat of the config as an agent episode into\n"
            "DIR/<RUN>/ (default runs/); --resume finishes an interrupted run (RUN: its id or\n"
            "folder) without repeating finished episodes. See docs/agents.md.\n");
        return 0;
      default:
        return 2;
    }
  }
  if ((!a->config) == (!a->resume) || optind < argc) {
    fprintf(stderr, "envctl run: give either --config FILE or --resume RUN\n");
    return 2;
  }
  return -1;
}

/* Checks the config of a new run (loaded from the file config): agent.adapter a known
 * adapter whose agent can run, tasks a list (a single string becomes a list of one),
 * reward last or best. Returns 0, or 2 after printing why it is refused. */
static int ec_run_check_config(json_t *cfg, const char *config) {
  char err[1024];
  json_t *agent = json_object_get(cfg, "agent");
  const char *ad = json_string_value(json_object_get(agent, "adapter"));
  if (!json_is_object(agent) || !ad || !ka_adapter_find(ad)) {
    fprintf(stderr, "envctl run: %s: agent.adapter must be one of %s\n", config,
            ka_adapter_names());
    return 2;
  }
  /* an agent that cannot run (no command, no recording, CLI not installed) is refused
   * before the run folder exists, not recorded as every episode failing */
  if (ka_adapter_check(agent, err, sizeof err)) {
    fprintf(stderr, "envctl run: %s: agent: %s\n", config, err);
    return 2;
  }
  json_t *sel = json_object_get(cfg, "tasks");
  if (json_is_string(sel)) json_object_set_new(cfg, "tasks", json_pack("[O]", sel));
  if (!json_is_array(json_object_get(cfg, "tasks"))) {
    fprintf(stderr, "envctl run: %s: tasks: a list of task ids, families or all\n", config);
    return 2;
  }
  const char *rw = json_string_value(json_object_get(cfg, "reward"));
  if (rw && strcmp(rw, "last") && strcmp(rw, "best")) {
    fprintf(stderr, "envctl run: %s: reward: last or best\n", config);
    return 2;
  }
  return 0;
}

/* Names a new run: a config without a label gets "run", one without a run id gets
 * LABEL-YYYYmmdd-HHMMSS-PID (UTC, the label cut to 150 bytes), every character outside
 * [A-Za-z0-9._-] made '_'. */
static void ec_run_name(json_t *cfg) {
  if (!json_is_string(json_object_get(cfg, "label")))
    json_object_set_new(cfg, "label", json_string("run"));
  if (json_is_string(json_object_get(cfg, "run"))) return;
  char id[200];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  char stamp[32];
  strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  snprintf(id, sizeof id, "%.150s-%s-%d", json_string_value(json_object_get(cfg, "label")), stamp,
           (int)getpid());
  for (char *p = id; *p; p++)
    if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-", *p)) *p = '_';
  json_object_set_new(cfg, "run", json_string(id));
}

/* The config of a new run from the YAML file config, checked and named, with its run
 * folder runs_dir/<RUN> written into dir (dirlen bytes). Returns the config (the caller
 * owns it), or NULL after printing why: unreadable, not a mapping, refused by
 * ec_run_check_config, or the run folder exists already. */
static json_t *ec_run_config_new(const char *config, const char *runs_dir, char *dir,
                                 size_t dirlen) {
  char err[1024];
  json_t *cfg = ec_yaml_load(config, err, sizeof err);
  if (!cfg || !json_is_object(cfg)) {
    fprintf(stderr, "envctl run: %s\n", cfg ? "the config is not a mapping" : err);
    json_decref(cfg);
    return NULL;
  }
  if (ec_run_check_config(cfg, config)) {
    json_decref(cfg);
    return NULL;
  }
  ec_run_name(cfg);
  snprintf(dir, dirlen, "%s/%s", runs_dir, json_string_value(json_object_get(cfg, "run")));
  struct stat st;
  if (stat(dir, &st) == 0) {
    fprintf(stderr, "envctl run: %s exists; use --resume %s to finish it\n", dir,
            json_string_value(json_object_get(cfg, "run")));
    json_decref(cfg);
    return NULL;
  }
  return cfg;
}

/* The config of the run to finish with --resume RUN: its folder (RUN itself when it is
 * a folder, else runs_dir/RUN) is written into dir (dirlen bytes) and the config read
 * from its run.json. Returns the config (the caller owns it), or NULL after printing
 * why: no run.json there, or its agent cannot run. */
static json_t *ec_run_config_resume(const char *resume, const char *runs_dir, char *dir,
                                    size_t dirlen) {
  char err[1024];
  struct stat st;
  if (stat(resume, &st) == 0 && S_ISDIR(st.st_mode))
    snprintf(dir, dirlen, "%s", resume);
  else
    snprintf(dir, dirlen, "%s/%s", runs_dir, resume);
  char p[PATH_MAX + 32];
  snprintf(p, sizeof p, "%s/run.json", dir);
  json_error_t je;
  json_t *run = json_load_file(p, 0, &je);
  json_t *cfg = json_incref(json_object_get(run, "config"));
  json_decref(run);
  if (!cfg) {
    fprintf(stderr, "envctl run: --resume %s: no run folder with run.json at %s\n", resume, dir);
    return NULL;
  }
  if (ka_adapter_check(json_object_get(cfg, "agent"), err, sizeof err)) {
    fprintf(stderr, "envctl run: --resume %s: agent: %s\n", resume, err);
    json_decref(cfg);
    return NULL;
  }
  return cfg;
}

/* The admin token for held-out scoring when the config asks for held_out: with --server
 * from --admin-token-file (or KA_ADMIN_TOKEN), embedded from admin.token in the server's
 * state folder emb->state. Returns the token (the caller wipes and frees it), or NULL
 * when not asked for or not loadable (then printed: held_out records the error). */
static char *ec_run_admin_token(const json_t *cfg, const ec_run_args *a, const ec_embedded *emb) {
  if (!json_is_true(json_object_get(cfg, "held_out"))) return NULL;
  char err[1024], tp[PATH_MAX];
  /* embedded: the token envctl wrote into the server's private state folder */
  snprintf(tp, sizeof tp, "%s/admin.token", emb->state);
  char *token = ec_admin_token_load(a->o.server ? a->token_file : tp, err, sizeof err);
  if (!token)
    fprintf(stderr, "envctl run: held-out scoring: %s; held_out records the error\n", err);
  return token;
}

/* The plan recorded in runs/<RUN>/run.json (absdir: the run folder). Returns a new
 * reference; NULL when run.json has none. */
static json_t *ec_run_plan_load(const char *absdir) {
  char p[PATH_MAX + 32];
  snprintf(p, sizeof p, "%s/run.json", absdir);
  json_error_t je;
  json_t *run = json_load_file(p, 0, &je);
  json_t *plan = json_incref(json_object_get(run, "plan"));
  json_decref(run);
  return plan;
}

/* The tasks of the server (all, in its order) that the selectors sel choose, followed
 * by each selector naming a task id (with '/', no '*', no trailing '/') that is neither
 * a chosen id nor a parent folder of one. Returns a new array. */
static json_t *ec_run_chosen(const json_t *all, const json_t *sel) {
  size_t i;
  json_t *t;
  json_t *chosen = json_array();
  json_array_foreach(all, i, t) if (ec_task_selected(json_string_value(t), sel))
      json_array_append(chosen, t);
  json_array_foreach(sel, i, t) {
    const char *s = json_string_value(t);
    if (s && strchr(s, '/') && !strchr(s, '*') && s[strlen(s) - 1] != '/') {
      size_t j;
      json_t *u;
      int found = 0;
      size_t n = strlen(s); /* an id, or a parent folder of a chosen id */
      json_array_foreach(chosen, j, u) found |=
          !strncmp(json_string_value(u), s, n) && strchr("/", json_string_value(u)[n]);
      if (!found) json_array_append(chosen, t);
    }
  }
  return chosen;
}

/* The plan of a new run: each chosen task x repeat (the config's repeats, default 1) as
 * {task, repeat, seed, dir}, dir absdir/episodes/<task with '/' as '~'>@<repeat>.
 * Asks the server c for its tasks (ListTasks). Returns a new array, or NULL with err
 * set when the server refuses or cannot be asked. */
static json_t *ec_run_plan_new(ka_client *c, const json_t *cfg, const char *absdir, char *err,
                               size_t errlen) {
  json_t *all = ec_server_tasks(c, err, errlen);
  if (!all) return NULL;
  int repeats = json_is_integer(json_object_get(cfg, "repeats"))
                    ? (int)json_integer_value(json_object_get(cfg, "repeats"))
                    : 1;
  unsigned long long base = (unsigned long long)json_integer_value(json_object_get(cfg, "seed"));
  json_t *plan = json_array();
  size_t i;
  json_t *t;
  /* selectors naming no task of the server still run (and fail at reset) so that a
   * missing task is a counted failure, not a silently smaller run */
  json_t *chosen = ec_run_chosen(all, json_object_get(cfg, "tasks"));
  json_array_foreach(chosen, i, t) {
    for (int k = 0; k < repeats; k++) {
      char d[PATH_MAX + 300], name[300];
      snprintf(name, sizeof name, "%s", json_string_value(t));
      for (char *p = name; *p; p++)
        if (*p == '/') *p = '~';
      snprintf(d, sizeof d, "%s/episodes/%s@%d", absdir, name, k);
      json_array_append_new(
          plan, json_pack("{s:O, s:i, s:I, s:s}", "task", t, "repeat", k, "seed",
                          (json_int_t)ec_episode_seed(base, json_string_value(t), k), "dir", d));
    }
  }
  json_decref(chosen);
  json_decref(all);
  return plan;
}

/* Records a new run in its folder absdir: run.json (schema kernelarena.run.v1: run,
 * label, created_at, config, plan) and a copy of the config file config (when given and
 * readable) as config.yaml. Write errors are ignored. */
static void ec_run_record(json_t *cfg, json_t *plan, const char *absdir, const char *config) {
  json_t *run = json_pack("{s:s, s:O, s:O, s:f, s:O, s:O}", "schema", "kernelarena.run.v1", "run",
                          json_object_get(cfg, "run"), "label", json_object_get(cfg, "label"),
                          "created_at", ka_wall_s(), "config", cfg, "plan", plan);
  char p[PATH_MAX + 32];
  snprintf(p, sizeof p, "%s/run.json", absdir);
  json_dump_file(run, p, JSON_INDENT(2));
  json_decref(run);
  if (config) {
    char *y;
    size_t yl;
    if (ka_read_file(config, 0, &y, &yl) == KA_OK) {
      snprintf(p, sizeof p, "%s/config.yaml", absdir);
      ka_write_file(p, y, yl);
      free(y);
    }
  }
}

/* How many episodes run in parallel: jobs when given (>= 1), else the config's parallel,
 * else the live executors of the server c (Health); at least 1. */
static int ec_run_jobs(ka_client *c, const json_t *cfg, int jobs) {
  /* asked even when not needed: every connection completes a request before it closes
   * (see ec_run_worker), and on resume nothing else has been asked yet */
  int executors = ec_server_executors(c);
  if (jobs < 1)
    jobs = json_is_integer(json_object_get(cfg, "parallel"))
               ? (int)json_integer_value(json_object_get(cfg, "parallel"))
               : executors;
  if (jobs < 1) jobs = 1;
  return jobs;
}

/* The episodes of plan without a final result (resume: keep the finished ones, run the
 * rest), counting the finished ones in r->skipped. Returns a new array. */
static json_t *ec_run_todo(ec_run *r, const json_t *plan) {
  json_t *todo = json_array();
  size_t i;
  json_t *e;
  json_array_foreach(plan, i, e) {
    json_t *res = ec_finished_result(json_string_value(json_object_get(e, "dir")));
    if (res) {
      r->skipped++;
      json_decref(res);
    } else {
      json_array_append(todo, e);
    }
  }
  return todo;
}

/* Runs r->plan on jobs worker threads (at most 64) and waits for them all; a thread
 * that cannot be created is left out. */
static void ec_run_threads(ec_run *r, int jobs) {
  pthread_t th[64];
  if (jobs > 64) jobs = 64;
  int started = 0;
  for (int k = 0; k < jobs; k++)
    if (pthread_create(&th[k], NULL, ec_run_worker, r) == 0) started++;
  for (int k = 0; k < started; k++) pthread_join(th[k], NULL);
}

/* Writes summary.json of the whole plan into the run folder r->dir (complete: false when
 * interrupted) and prints the totals and the results folder on stdout. */
static void ec_run_report(const ec_run *r, json_t *plan) {
  ec_run sum = *r;
  sum.plan = plan;
  json_t *summary = ec_run_summary(&sum);
  json_object_set_new(summary, "complete", json_boolean(!ec_agent_interrupted));
  char p[PATH_MAX + 32];
  snprintf(p, sizeof p, "%s/summary.json", r->dir);
  json_dump_file(summary, p, JSON_INDENT(2));
  printf("run %s: %lld episodes, %lld correct, %lld failed, mean reward %.2f%s\n",
         json_string_value(json_object_get(r->cfg, "run")),
         (long long)json_integer_value(json_object_get(summary, "episodes")),
         (long long)json_integer_value(json_object_get(summary, "correct")),
         (long long)json_integer_value(json_object_get(summary, "failed")),
         json_number_value(json_object_get(summary, "mean_reward")),
         ec_agent_interrupted ? " (interrupted: finish with --resume)" : "");
  printf("results: %s\n", r->dir);
  json_decref(summary);
}

/* Runs the unfinished episodes of plan on jobs threads against the server at url into
 * the run folder absdir, then writes and prints the summary. token: the admin token for
 * held-out scoring, or NULL. Returns the exit code: 130 when interrupted, else 0. */
static int ec_run_episodes(const json_t *cfg, json_t *plan, const char *url, const char *token,
                           int timeout_s, const char *absdir, int jobs) {
  ec_run r = {.dir = absdir,
              .url = url,
              .cfg = cfg,
              .tty = isatty(2),
              .timeout_s = timeout_s,
              .admin_token = token};
  pthread_mutex_init(&r.mu, NULL);
  json_t *todo = ec_run_todo(&r, plan);
  r.plan = todo;
  r.total = (int)json_array_size(plan);
  printf("run %s: %s, %d episodes (%d already finished), %d in parallel\n",
         json_string_value(json_object_get(cfg, "run")), absdir, r.total, r.skipped, jobs);
  fflush(stdout);
  ec_run_threads(&r, jobs);
  ec_run_report(&r, plan);
  json_decref(todo);
  pthread_mutex_destroy(&r.mu);
  return ec_agent_interrupted ? 130 : 0;
}

/* Runs the run whose folder is dir against the server at url: makes the folder once the
 * server answers, plans a new run (and records it) or reloads the plan of a resumed one,
 * picks the jobs and runs the episodes. token: the admin token, or NULL. Returns the
 * exit code: 1 when the server cannot be reached or asked for its tasks, else that of
 * ec_run_episodes. */
static int ec_run_execute(const ec_run_args *a, json_t *cfg, const char *url, const char *token,
                          const char *dir) {
  char err[1024];
  ka_client *cl;
  if (ec_server_open(url, a->timeout_s, &cl, err, sizeof err)) {
    fprintf(stderr, "envctl run: %s\n", err);
    return 1;
  }
  /* made once the server answers: an unreachable server leaves no empty run folder */
  ka_mkdirs(dir);
  char absdir[PATH_MAX];
  if (!realpath(dir, absdir)) snprintf(absdir, sizeof absdir, "%s", dir);
  json_t *plan;
  if (a->resume) {
    plan = ec_run_plan_load(absdir);
  } else {
    plan = ec_run_plan_new(cl, cfg, absdir, err, sizeof err);
    if (!plan) {
      fprintf(stderr, "envctl run: %s\n", err);
      ka_client_close(cl);
      return 1;
    }
    ec_run_record(cfg, plan, absdir, a->config);
  }
  int jobs = ec_run_jobs(cl, cfg, a->jobs);
  ka_client_close(cl);
  int rc = ec_run_episodes(cfg, plan, url, token, a->timeout_s, absdir, jobs);
  json_decref(plan);
  return rc;
}

/* `envctl run`: parses the options, loads the config (new or resumed), starts an
 * embedded envserver and gpuexec unless --server is given, and runs the run. Returns the
 * exit code: 0 done, 1 server or start failure, 2 usage or config error, 130
 * interrupted. */
int cmd_run(int argc, char **argv) {
  ec_run_args a = {.runs_dir = "runs", .timeout_s = KA_OPT_REQUEST_TIMEOUT_S};
  int rc = ec_run_parse(argc, argv, &a);
  if (rc >= 0) return rc;
  char err[1024], dir[PATH_MAX], tbuf[PATH_MAX];
  json_t *cfg = a.config ? ec_run_config_new(a.config, a.runs_dir, dir, sizeof dir)
                         : ec_run_config_resume(a.resume, a.runs_dir, dir, sizeof dir);
  if (!cfg) return 2;
  a.o.tasks = ka_tasks_dir(a.o.tasks, tbuf, sizeof tbuf);
  ec_agent_install_signals();
  ec_embedded emb = {0};
  const char *url = a.o.server;
  if (!url) {
    fprintf(stderr, "envctl run: starting envserver and gpuexec (tasks: %s)...\n", a.o.tasks);
    if (ec_embedded_start(&a.o, &emb, err, sizeof err)) {
      fprintf(stderr, "envctl run: %s\n", err);
      json_decref(cfg);
      return 1;
    }
    url = emb.url;
  }
  char *token = ec_run_admin_token(cfg, &a, &emb);
  rc = ec_run_execute(&a, cfg, url, token, dir);
  if (!a.o.server) ec_embedded_stop(&emb, 0);
  if (token) memset(token, 0, strlen(token));
  free(token);
  json_decref(cfg);
  return rc;
}
