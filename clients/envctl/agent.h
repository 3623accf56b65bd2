/* envctl agent commands: `envctl step`, `envctl mcp`, `envctl agent`, `envctl run`.
 *
 * An agent works in a workspace folder that holds the task's editable files, prompt.md
 * and .kernelarena/episode.json (server URL, episode id, editable files, steps taken),
 * written by the adapter. `envctl step` and the MCP tool `evaluate` submit the
 * workspace's editable files as one step of that episode; every step result is also
 * written to .kernelarena/last_result.json. docs/agents.md describes the formats.
 * Nothing here is thread-safe unless stated. */
#ifndef KA_ENVCTL_AGENT_H
#define KA_ENVCTL_AGENT_H

#include <jansson.h>
#include <limits.h>
#include <signal.h>

#include "kaclient.h"

#define EC_MAX_FILES 16

/* Where a step goes: resolved from options, environment and the workspace state file. */
typedef struct ec_step_target {
  char server[512];
  char episode[128];
  char workspace[PATH_MAX];
  char *files[EC_MAX_FILES]; /* editable file names (owned) */
  int nfiles;
  int step;      /* steps taken, as far as this workspace knows */
  int timeout_s; /* per Step request; default KA_OPT_REQUEST_TIMEOUT_S */
} ec_step_target;

/* Resolves the target of `envctl step`: each of server / episode comes from the
 * argument when non-NULL, else $KA_SERVER / $KA_EPISODE, else the workspace's
 * .kernelarena/episode.json; the workspace is ws, else $KA_WORKSPACE, else the current
 * folder; the editable files are $KA_FILES (space-separated), else the state file.
 * Returns KA_OK, or KA_EINVAL with what is missing in err. Free with
 * ec_step_target_free. */
int ec_step_target_load(const char *ws, const char *server, const char *episode, ec_step_target *t,
                        char *err, size_t errlen);
void ec_step_target_free(ec_step_target *t);

/* Submits the editable files present in the workspace as one step and waits for the
 * result (up to t->timeout_s). The expected_step comes from the server's State; where
 * State is not served, from the state file, and a wrong one (the file is behind) is
 * corrected from the server's refusal message and retried once. On KA_OK *result is the step
 * result as JSON (caller owns it; shape in docs/agents.md), it was written to
 * .kernelarena/last_result.json and the state file's step count was advanced.
 * Errors: KA_EINVAL (bad workspace), KA_EIO, KA_ETIMEDOUT, KA_EUNAVAIL, or KA_ESTATE for
 * a refusal by the server; the reason is in err. Nothing is written on error. */
int ec_step_submit(ec_step_target *t, json_t **result, char *err, size_t errlen);

/* The JSON form of a StepResponse (new reference): step, reward, status, compiled,
 * correct, speedup_geomean, terminated, truncated, message, compile_log, runtime_log,
 * cases[], components{}, info{}. Non-finite numbers become null. */
json_t *ec_step_json(const Kernelarena__V1__StepResponse *s);

/* The JSON form of one CaseResult (new reference): name, correct, max_abs_err,
 * max_rel_err, mismatches, elements, baseline_ms, candidate_ms, speedup, message. */
json_t *ec_case_json(const Kernelarena__V1__CaseResult *c);

/* A short human-readable summary of a step result made by ec_step_json (malloc'd). */
char *ec_step_summary(const json_t *result);

/* Double that JSON can hold: json_real for finite x, json_null otherwise. */
json_t *ec_json_num(double x);

/* Loads a YAML file into JSON: mappings become objects, sequences arrays; plain
 * scalars that parse as integers, reals or true/false/null become those, everything
 * else strings. Returns NULL with the reason (file, line) in err. */
json_t *ec_yaml_load(const char *path, char *err, size_t errlen);

/* One agent episode (see ec_agent_episode). */
typedef struct ec_episode_req {
  const char *task;
  int has_seed;
  unsigned long long seed;
  const char *run;         /* run id (Reset option `run`); NULL: "default" */
  const char *label;       /* run label (Reset option `label`) */
  int repeat;              /* repeat index, recorded */
  const char *out_dir;     /* episode folder, absolute; created */
  int max_steps;           /* > 0 overrides the agent config's max_steps (default 20) */
  const char *reward;      /* "last" or "best" unless the agent config says (default last) */
  int held_out;            /* score the final kernel on the held-out cases (docs/agents.md) */
  const char *admin_token; /* the server's admin token (held-out scoring); never given to
                              the agent. NULL: held_out is recorded as an error */
  int timeout_s;           /* per request to the server */
} ec_episode_req;

/* The admin token for held-out scoring: the contents of file (surrounding white space
 * dropped) when file is non-NULL, else $KA_ADMIN_TOKEN. Returns a malloc'd string
 * (caller frees), or NULL when there is none or the file cannot be read (reason in
 * err). */
char *ec_admin_token_load(const char *file, char *err, size_t errlen);

/* Runs one episode with the adapter of agent_cfg (an object: adapter, model, effort,
 * permission_mode, command, replay, timeout_s, max_steps, reward, final_eval, mcp,
 * args, bin; docs/agents.md) against the server of c: Reset, workspace, step proxy,
 * the CLI in its own process group, final evaluation, Close, and with rq->held_out the
 * held-out scoring of the final kernel (an admin Evaluate of the scored step). Writes
 * out_dir/episode.json, steps.jsonl, steps/<n>/, final/, workspace/ and the transcript.
 * Never fails as a call: errors (reset refused, the CLI could not be started, ...) are
 * recorded in the returned result (status "error", reward 0), which the caller owns; a
 * config that ka_adapter_check (agents.h) refuses is recorded so before any Reset is sent. */
json_t *ec_agent_episode(ka_client *c, const json_t *agent_cfg, const ec_episode_req *rq);

/* Sets KEY=VALUE in a config object; integers and true/false are typed. KA_EINVAL if
 * there is no '='. */
int ec_cfg_set(json_t *cfg, const char *kv);

/* SIGINT/SIGTERM set ec_agent_interrupted (agents are then stopped, episodes closed and
 * recorded as interrupted); SIGPIPE is ignored. */
void ec_agent_install_signals(void);
extern volatile sig_atomic_t ec_agent_interrupted;

#endif
