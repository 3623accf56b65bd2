/* envctl episode --task ID [--agent baseline|command:CMD|files:DIR]: reset, let the agent
 * act, step, print, repeat. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agents.h"
#include "envctl.h"
#include "ka_common.h"

typedef struct ec_files {
  int n;
  char *path[16];
  char *content[16];
  size_t len[16];
} ec_files;

static void ec_files_free(ec_files *f) {
  for (int i = 0; i < f->n; i++) free(f->path[i]), free(f->content[i]);
  f->n = 0;
}

static const char *ec_info(const Kernelarena__V1__ResetResponse *r, const char *key) {
  for (size_t i = 0; i < r->n_info; i++)
    if (!strcmp(r->info[i]->key, key)) return r->info[i]->value;
  return NULL;
}

/* Reads the editable files present in dir. Missing files are left out (they keep
 * their current contents on the server). */
static int ec_read_dir(const char *dir, const Kernelarena__V1__Observation *obs, ec_files *out) {
  for (size_t i = 0; i < obs->n_files && out->n < 16; i++) {
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", dir, obs->files[i]->path);
    char *buf;
    size_t len;
    int rc = ka_read_file(p, 0, &buf, &len);
    if (rc == KA_ENOENT) continue;
    if (rc) {
      fprintf(stderr, "envctl: cannot read %s: %s\n", p, ka_strerror(rc));
      return 1;
    }
    out->path[out->n] = strdup(obs->files[i]->path);
    out->content[out->n] = buf;
    out->len[out->n++] = len;
  }
  return 0;
}

static int ec_write_dir(const char *dir, const Kernelarena__V1__Observation *obs) {
  if (ka_mkdirs(dir)) return 1;
  for (size_t i = 0; i < obs->n_files; i++) {
    char p[PATH_MAX];
    const char *rel = obs->files[i]->path;
    /* only relative paths inside the workspace (the server names them; a path that
     * climbs out is refused, not written) */
    if (!rel || !*rel || rel[0] == '/' || !strcmp(rel, "..") || !strncmp(rel, "../", 3) ||
        strstr(rel, "/../") || (strlen(rel) >= 3 && !strcmp(rel + strlen(rel) - 3, "/..")))
      return 1;
    int w = snprintf(p, sizeof p, "%s/%s", dir, rel);
    if (w < 0 || (size_t)w >= sizeof p) return 1;
    /* a file in a folder (a command task's source/x.py): its folders first */
    char *slash = strrchr(p, '/');
    if (slash > p + strlen(dir)) {
      *slash = '\0';
      int rc = ka_mkdirs(p);
      *slash = '/';
      if (rc) return 1;
    }
    if (ka_write_file(p, obs->files[i]->content.data, obs->files[i]->content.len)) return 1;
  }
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/prompt.md", dir);
  return ka_write_file(p, obs->prompt, strlen(obs->prompt)) ? 1 : 0;
}

/* Runs a command agent (`/bin/sh -c cmd`) in the workspace through the agents' process
 * runner (its own process group, killed at the end; no KA_ADMIN_TOKEN), with a time
 * limit. Returns its exit status, or -1 (killed, timed out, could not start). */
static int ec_run_agent(const char *cmd, const char *ws, const char *episode, int step,
                        int timeout_s) {
  char e_ws[PATH_MAX + 16], e_ep[200], e_step[32];
  snprintf(e_ws, sizeof e_ws, "KA_WORKSPACE=%s", ws);
  snprintf(e_ep, sizeof e_ep, "KA_EPISODE=%s", episode);
  snprintf(e_step, sizeof e_step, "KA_STEP=%d", step);
  char *env[] = {e_ws, e_ep, e_step, "KA_PROMPT_FILE=prompt.md", NULL};
  char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
  ka_agent_proc p = {.argv = argv,
                     .cwd = ws,
                     .env = env,
                     .timeout_s = timeout_s,
                     .grace_s = 0,
                     .interrupted = NULL};
  ka_agent_proc_result r;
  if (ka_agent_run(&p, &r)) return -1;
  if (r.timed_out) fprintf(stderr, "envctl: agent exceeded %d s; killing it\n", timeout_s);
  return r.exit_code;
}

static void ec_print_obs_device(const Kernelarena__V1__Device *d) {
  if (!d || !d->name) return;
  printf("device: %s (%s, %s", d->name, d->backend, d->arch);
  if (d->multiprocessors)
    printf(", %d %s", d->multiprocessors, strcmp(d->backend, "host") ? "SMs" : "cores");
  if (d->warp_size > 1) printf(", warp %d", d->warp_size);
  printf(")\n");
}

static void ec_print_log(const char *title, const char *log, int max_lines) {
  if (!log || !*log) return;
  printf("  %s:\n", title);
  int lines = 0;
  for (const char *p = log; *p && lines < max_lines; lines++) {
    size_t n = strcspn(p, "\n");
    printf("    %.*s\n", (int)n, p);
    p += n + (p[n] == '\n');
    if (lines + 1 == max_lines && *p) printf("    ... (truncated)\n");
  }
}

static double ec_component(const Kernelarena__V1__StepResponse *s, const char *key, double dflt) {
  for (size_t i = 0; i < s->n_reward_components; i++)
    if (!strcmp(s->reward_components[i]->key, key)) return s->reward_components[i]->value;
  return dflt;
}

static void ec_print_step(int step, const Kernelarena__V1__StepResponse *s, int verbose) {
  const Kernelarena__V1__Observation *o = s->observation;
  int compiled = ec_component(s, "compiled", 0) > 0;
  printf("\nstep %d: status %s, compiled %s, reward %.2f%s%s\n", step, ka_status_name(o->status),
         compiled ? "yes" : "no", s->reward, s->truncated ? " (truncated: step limit reached)" : "",
         s->terminated ? " (terminated)" : "");
  if (o->message && *o->message && o->status != KERNELARENA__V1__STATUS__OK)
    printf("  %s\n", o->message);
  if (o->n_cases) {
    printf("  %-10s %-7s %-11s %-11s %-12s %-12s %s\n", "case", "correct", "max_abs_err",
           "max_rel_err", "baseline_ms", "candidate_ms", "speedup");
    for (size_t i = 0; i < o->n_cases; i++) {
      const Kernelarena__V1__CaseResult *c = o->cases[i];
      if (c->timed_calls > 0 || c->speedup > 0)
        printf("  %-10s %-7s %-11.3g %-11.3g %-12.4f %-12.4f %.3fx\n", c->name,
               c->correct ? "yes" : "NO", c->max_abs_err, c->max_rel_err, c->baseline_ms,
               c->candidate_ms, c->speedup);
      else /* not timed (it failed first): no figures that read as a measured 0 */
        printf("  %-10s %-7s %-11.3g %-11.3g %-12s %-12s %s\n", c->name, c->correct ? "yes" : "NO",
               c->max_abs_err, c->max_rel_err, "-", "-", "-");
      if (!c->correct && c->message && *c->message) printf("      %s\n", c->message);
    }
    /* the integrity checks' figures (docs/integrity.md): which timed calls were verified
     * against the baseline, and the physics floor */
    for (size_t i = 0; i < o->n_cases; i++) {
      const Kernelarena__V1__CaseResult *c = o->cases[i];
      if (c->timed_calls <= 0) continue;
      printf("  %-10s %d of %d timed calls verified (drawn %s the calls), floor %.4g ms\n", c->name,
             c->verified_calls, c->timed_calls, c->verified_after_calls ? "after" : "before",
             c->floor_ms);
    }
  }
  double g = ec_component(s, "speedup_geomean", NAN);
  int harness = 0; /* a command task: its component is the seed's arithmetic mean */
  for (size_t i = 0; i < s->n_info; i++)
    harness |= !strcmp(s->info[i]->key, "integrity") && !strcmp(s->info[i]->value, "task-harness");
  if (!isnan(g) && o->status == KERNELARENA__V1__STATUS__OK)
    printf(harness ? "  mean speedup %.3fx (arithmetic, the task harness's score)\n"
                   : "  geometric-mean speedup %.3fx\n",
           g);
  if (o->status == KERNELARENA__V1__STATUS__COMPILE_ERROR)
    ec_print_log("compiler log", o->compile_log, 30);
  if (verbose)
    ec_print_log("runtime log", o->runtime_log, 200);
  else if (o->status == KERNELARENA__V1__STATUS__RUNTIME_ERROR ||
           o->status == KERNELARENA__V1__STATUS__OOM ||
           o->status == KERNELARENA__V1__STATUS__TIMEOUT)
    ec_print_log("runtime log", o->runtime_log, 20);
  if (o->telemetry && o->telemetry->valid)
    printf("  telemetry: SM %d MHz, memory %d MHz, %d C, %.0f W\n", o->telemetry->sm_clock_mhz,
           o->telemetry->mem_clock_mhz, o->telemetry->temperature_c, o->telemetry->power_w);
  fflush(stdout);
}

/* The agent of `envctl episode` (ec_ep_agent_setup). */
typedef struct ec_ep_agent {
  const char *cmd;       /* command:CMD: the command; NULL otherwise */
  const char *files_dir; /* files:DIR: the folder; NULL otherwise */
  char ws[PATH_MAX];     /* command:CMD: its workspace; "" otherwise */
} ec_ep_agent;

/* Checks --agent before the reset (a bad agent must not leave an episode open):
 * baseline, command:CMD, or files:DIR with DIR a folder. Returns 0, or 2 after printing
 * why. */
static int ec_ep_check_agent(const char *agent) {
  if (!strncmp(agent, "files:", 6)) {
    struct stat st;
    if (stat(agent + 6, &st) != 0 || !S_ISDIR(st.st_mode)) {
      fprintf(stderr, "envctl: --agent files:%s: no such folder\n", agent + 6);
      return 2;
    }
  } else if (strncmp(agent, "command:", 8) && strcmp(agent, "baseline")) {
    /* before the reset: a bad agent must not leave an episode open (new user) */
    fprintf(stderr, "envctl: unknown agent '%s' (baseline, files:DIR or command:CMD)\n", agent);
    return 2;
  }
  return 0;
}

/* Resets an episode of o->task (seed when given, option max_steps) within timeout_ms.
 * Returns 0 with *rr (a Reset response; the caller frees it), or 1 after printing why
 * (with a hint to `envctl tasks --server URL` or `--tasks DIR`, whichever this episode
 * used, for an unknown task). */
static int ec_ep_reset(ka_client *c, const ec_opts *o, int timeout_ms,
                       Kernelarena__V1__Response **rr) {
  char err[1024];
  Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__ResetRequest rs = KERNELARENA__V1__RESET_REQUEST__INIT;
  rs.task_id = (char *)o->task;
  rs.seed = o->seed;
  rs.has_seed = o->has_seed;
  char steps_buf[32];
  snprintf(steps_buf, sizeof steps_buf, "%d", o->max_steps);
  Kernelarena__V1__ResetRequest__OptionsEntry opt =
      KERNELARENA__V1__RESET_REQUEST__OPTIONS_ENTRY__INIT;
  opt.key = "max_steps";
  opt.value = steps_buf;
  Kernelarena__V1__ResetRequest__OptionsEntry *optp = &opt;
  rs.options = &optp;
  rs.n_options = 1;
  req.body_case = KERNELARENA__V1__REQUEST__BODY_RESET;
  req.reset = &rs;
  if (ka_client_call(c, &req, timeout_ms, rr, err, sizeof err)) {
    fprintf(stderr, "envctl: reset: %s\n", err);
    return 1;
  }
  if ((*rr)->body_case != KERNELARENA__V1__RESPONSE__BODY_RESET) {
    ec_print_error("reset", *rr);
    if ((*rr)->body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR &&
        (*rr)->error->code == KERNELARENA__V1__ERROR_CODE__NOT_FOUND)
      fprintf(stderr, "envctl: `envctl tasks %s %s` lists the tasks there\n",
              o->server ? "--server" : "--tasks", o->server ? o->server : o->tasks);
    ka_client_free_response(*rr);
    return 1;
  }
  return 0;
}

/* Prints the new episode on stdout: its id, task, seed and version, the device, the
 * agent and the editable files. */
static void ec_ep_print_reset(const Kernelarena__V1__ResetResponse *reset, const ec_opts *o) {
  printf("episode %s: task %s, seed %llu, version %s\n", reset->episode_id, o->task,
         (unsigned long long)reset->seed,
         ec_info(reset, "task_version") ? ec_info(reset, "task_version") : "?");
  ec_print_obs_device(reset->observation->device);
  printf("agent: %s; editable files:", o->agent);
  for (size_t i = 0; i < reset->observation->n_files; i++)
    printf(" %s", reset->observation->files[i]->path);
  printf("\n");
}

/* Sets up the agent o->agent into a: for command:CMD the workspace (--workspace, else a
 * new $TMPDIR/kernelarena-ws-XXXXXX) holding the observation's files and prompt.md.
 * Returns 0, 1 after printing why the workspace could not be made, or 2 for an unknown
 * agent. */
static int ec_ep_agent_setup(const ec_opts *o, const Kernelarena__V1__Observation *obs,
                             ec_ep_agent *a) {
  if (!strncmp(o->agent, "command:", 8)) {
    a->cmd = o->agent + 8;
    if (o->workspace)
      snprintf(a->ws, sizeof a->ws, "%s", o->workspace);
    else {
      const char *tmp = getenv("TMPDIR");
      snprintf(a->ws, sizeof a->ws, "%s/kernelarena-ws-XXXXXX", tmp && *tmp ? tmp : "/tmp");
      if (!mkdtemp(a->ws)) {
        fprintf(stderr, "envctl: mkdtemp: %s\n", strerror(errno));
        return 1;
      }
    }
    if (ec_write_dir(a->ws, obs)) {
      fprintf(stderr, "envctl: cannot write the workspace %s\n", a->ws);
      return 1;
    }
    printf("workspace: %s\n", a->ws);
  } else if (!strncmp(o->agent, "files:", 6)) {
    a->files_dir = o->agent + 6;
  } else if (strcmp(o->agent, "baseline")) {
    fprintf(stderr, "envctl: unknown agent '%s' (baseline, files:DIR or command:CMD)\n", o->agent);
    return 2;
  }
  return 0;
}

/* Lets the agent a act for step (0-based) of episode and reads the editable files it
 * offers into f: the command's workspace after it ran (a failing command is warned
 * about, and what it left is submitted), the files: folder (at least one file), or
 * nothing for the baseline. Returns 0, or 1 after printing why. */
static int ec_ep_act(const ec_ep_agent *a, const Kernelarena__V1__Observation *obs,
                     const char *episode, int step, int agent_timeout_s, ec_files *f) {
  if (a->cmd) {
    int arc = ec_run_agent(a->cmd, a->ws, episode, step, agent_timeout_s);
    if (arc != 0)
      fprintf(stderr,
              "envctl: warning: the agent command exited with %d; submitting what it left in "
              "the workspace\n",
              arc);
    if (ec_read_dir(a->ws, obs, f)) return 1;
  } else if (a->files_dir) {
    if (ec_read_dir(a->files_dir, obs, f)) return 1;
    if (f->n == 0) {
      fprintf(stderr, "envctl: %s holds none of the editable files\n", a->files_dir);
      return 1;
    }
  }
  return 0;
}

/* Submits the files f as step (0-based) of episode within timeout_ms and prints the
 * result (ec_print_step). Frees f. Returns 0 with *reward and *done (terminated or
 * truncated), or 1 after printing why. */
static int ec_ep_step(ka_client *c, const char *episode, int step, ec_files *f, int timeout_ms,
                      int verbose, double *reward, int *done) {
  char err[1024];
  Kernelarena__V1__File fm[16], *fp[16];
  for (int i = 0; i < f->n; i++) {
    kernelarena__v1__file__init(&fm[i]);
    fm[i].path = f->path[i];
    fm[i].content.data = (uint8_t *)f->content[i];
    fm[i].content.len = f->len[i];
    fp[i] = &fm[i];
  }
  Kernelarena__V1__Request sreq = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__StepRequest st = KERNELARENA__V1__STEP_REQUEST__INIT;
  st.episode_id = (char *)episode;
  st.expected_step = step;
  st.files = fp;
  st.n_files = (size_t)f->n;
  sreq.body_case = KERNELARENA__V1__REQUEST__BODY_STEP;
  sreq.step = &st;
  Kernelarena__V1__Response *sr;
  int rc = ka_client_call(c, &sreq, timeout_ms, &sr, err, sizeof err);
  ec_files_free(f);
  if (rc) {
    fprintf(stderr, "envctl: step %d: %s\n", step + 1, err);
    return 1;
  }
  if (sr->body_case != KERNELARENA__V1__RESPONSE__BODY_STEP) {
    ec_print_error("step", sr);
    ka_client_free_response(sr);
    return 1;
  }
  ec_print_step(step + 1, sr->step, verbose);
  *reward = sr->step->reward;
  *done = sr->step->terminated || sr->step->truncated;
  ka_client_free_response(sr);
  return 0;
}

/* The steps of the episode reset answered: the agent acts, its files are submitted,
 * until o->max_steps steps or the episode ends. Returns 0 with the last step's reward
 * in *last_reward (0 without a step), or 1 when a step failed (printed). */
static int ec_ep_steps(ka_client *c, const ec_opts *o, const Kernelarena__V1__ResetResponse *reset,
                       const ec_ep_agent *a, int timeout_ms, double *last_reward) {
  for (int step = 0; step < o->max_steps; step++) {
    ec_files f = {0};
    int done = 0;
    if (ec_ep_act(a, reset->observation, reset->episode_id, step, o->agent_timeout_s, &f)) return 1;
    if (ec_ep_step(c, reset->episode_id, step, &f, timeout_ms, o->verbose, last_reward, &done))
      return 1;
    if (done) break;
  }
  return 0;
}

/* One episode of o->task against the server c with the agent o->agent (baseline,
 * command:CMD or files:DIR): reset, let the agent act, step, print, repeat; then Close.
 * Returns the exit code: 0, 1 for a failed reset, workspace or step, 2 for a bad agent. */
static int ec_episode(ka_client *c, const ec_opts *o) {
  int timeout_ms = o->timeout_s * 1000;
  if (ec_ep_check_agent(o->agent)) return 2;
  Kernelarena__V1__Response *rr;
  if (ec_ep_reset(c, o, timeout_ms, &rr)) return 1;
  Kernelarena__V1__ResetResponse *reset = rr->reset;
  ec_ep_print_reset(reset, o);
  ec_ep_agent a = {0};
  int exit_code = ec_ep_agent_setup(o, reset->observation, &a);
  if (exit_code) {
    ka_client_free_response(rr);
    return exit_code;
  }
  double last_reward = 0;
  exit_code = ec_ep_steps(c, o, reset, &a, timeout_ms, &last_reward);
  ec_close_episode(c, reset->episode_id, timeout_ms);
  if (exit_code == 0)
    printf("\nepisode %s closed; final reward %.2f\n", reset->episode_id, last_reward);
  ka_client_free_response(rr);
  return exit_code;
}

int cmd_episode(int argc, char **argv) {
  ec_opts o;
  int rc = ec_opts_parse(argc, argv, &o);
  if (rc >= 0) return rc;
  if (!o.task) {
    fprintf(stderr, "envctl: episode needs --task ID (see `envctl tasks`)\n");
    return 2;
  }
  /* before an embedded server starts too (a new user waited for one to hear of a typo) */
  if (ec_ep_check_agent(o.agent)) return 2;
  return ec_with_server(&o, ec_episode);
}
