/* agents: the adapters that drive coding-agent CLIs inside an episode, and the one
 * process runner that starts every agent (docs/agents.md).
 *
 * An internal static library (ka_agents) that envctl links. One file per adapter
 * (claude_code.c, codex.c, cursor.c, command.c, replay.c), each exporting one
 * ka_adapter_ops; adapter.c holds the table of them and the checks every config gets;
 * proc.c the process runner; transcript.c reads tokens and cost from a transcript.
 * An adapter is found by name only through ka_adapter_find.
 *
 * What an adapter does not do: talk to the server. The episode (Reset, workspace, step
 * proxy, final evaluation, Close) is envctl's (clients/envctl/agent.c); an adapter that
 * makes steps itself (replay) gets a submit callback. */
#ifndef KA_AGENTS_H
#define KA_AGENTS_H

#include <jansson.h>
#include <signal.h>
#include <stddef.h>

/* ------------------------------------------------------------------ process runner */

/* What to start: argv[0] is looked up on $PATH of this process (as execvp does). */
typedef struct ka_agent_proc {
  char *const *argv;                  /* NULL-terminated */
  const char *cwd;                    /* the agent's workspace */
  char *const *env;                   /* "K=V" strings added to (or replacing) this
                                         process's environment; NULL-terminated or NULL */
  const char *stdin_path;             /* NULL: /dev/null */
  const char *stdout_path;            /* NULL: inherited; else truncated and written */
  const char *stderr_path;            /* NULL: inherited */
  double timeout_s;                   /* wall-clock limit, seconds (> 0) */
  double grace_s;                     /* SIGTERM to SIGKILL of the group, seconds (>= 0) */
  volatile sig_atomic_t *interrupted; /* nonzero: stop the agent as at the time limit;
                                         NULL: never */
} ka_agent_proc;

typedef struct ka_agent_proc_result {
  int exit_code;   /* the exit status; -1 when killed by a signal, timed out or stopped */
  int timed_out;   /* the time limit was reached */
  int interrupted; /* *interrupted was set while it ran */
  double wall_s;   /* seconds from fork to the end */
} ka_agent_proc_result;

/* Runs p->argv in p->cwd, in a new process group, with the environment of this process
 * plus p->env and without KA_ADMIN_TOKEN (an agent must never score itself on held-out
 * cases); SIGINT, SIGTERM and SIGPIPE are default in the child. Waits until it exits, or
 * until the time limit or *p->interrupted, then sends SIGTERM to the group and SIGKILL
 * after p->grace_s; when it exits, whatever it left running in its group is killed.
 * Exit codes 126 (no workspace, unopenable stdio) and 127 (cannot exec) come from the
 * child. Returns KA_OK with *res filled, KA_ENOMEM or KA_ESYS (fork failed; *res zeroed).
 * The environment is built before fork, so it is safe to call from several threads. */
int ka_agent_run(const ka_agent_proc *p, ka_agent_proc_result *res);

/* ------------------------------------------------------------------ adapters */

/* An argument vector under construction: strings are copied; v[n] is always NULL. */
typedef struct ka_argv {
  char *v[96];
  int n;
} ka_argv;
/* Appends a copy of s (at most 94 arguments; more are dropped). */
void ka_argv_add(ka_argv *a, const char *s);
/* Frees the copies; a can be reused. */
void ka_argv_free(ka_argv *a);

/* What a CLI adapter's command line is built from. */
typedef struct ka_agent_ctx {
  const char *workspace;  /* absolute path of the agent's workspace */
  const char *prompt;     /* the task prompt */
  const char *mcp_config; /* an MCP client config file for the CLI; NULL: none */
} ka_agent_ctx;

/* Submits the workspace's editable files as one step (the episode's step proxy path).
 * Sets *done when the episode is over (truncated). Returns KA_OK or an error with the
 * reason in err. */
typedef int (*ka_agent_submit_fn)(void *ctx, int *done, char *err, size_t errlen);

/* The operations of one adapter. Slots that may be NULL say their default. */
typedef struct ka_adapter_ops {
  const char *name;        /* as in configs: adapter: NAME */
  const char *default_bin; /* the CLI it starts, found as a path or on $PATH by
                              ka_adapter_check (bin: overrides); NULL: no CLI to find */
  /* Checks the adapter's own settings (after the common ones). NULL: none. Returns
   * KA_OK or KA_EINVAL / KA_ENOENT with the reason in err; reads files only. */
  int (*check)(const json_t *cfg, char *err, size_t errlen);
  /* Builds the CLI's command line into a. NULL for an adapter that plays steps itself
   * (play). Returns KA_OK or KA_EINVAL with the reason in err. */
  int (*argv)(const json_t *cfg, const ka_agent_ctx *ctx, ka_argv *a, char *err, size_t errlen);
  /* Makes the steps itself, no CLI: writes files into workspace (editable file names in
   * files) and calls submit for each step, until done, an error or *interrupted. NULL
   * for CLI adapters. Returns KA_OK or an error with the reason in err. */
  int (*play)(const json_t *cfg, const char *workspace, char *const *files, int nfiles,
              ka_agent_submit_fn submit, void *sctx, volatile sig_atomic_t *interrupted, char *err,
              size_t errlen);
  /* The transcript's file name in the episode folder (the CLI's stdout). NULL:
   * "transcript.jsonl". */
  const char *(*transcript)(const json_t *cfg);
  int prompt_last_arg; /* the prompt is argv's last argument: recorded as "<prompt>" */
  int final_eval;      /* the episode may evaluate the final workspace after the agent */
} ka_adapter_ops;

extern const ka_adapter_ops ka_adapter_claude_code, ka_adapter_codex, ka_adapter_cursor,
    ka_adapter_command, ka_adapter_replay;

/* The adapter called name, or NULL. Thread-safe. */
const ka_adapter_ops *ka_adapter_find(const char *name);

/* The adapters' names joined with ", " ("claude_code, codex, ..."), for messages. A
 * static string; thread-safe. */
const char *ka_adapter_names(void);

/* Checks an agent config before anything is asked of a server, so that a config that
 * cannot run records no episode: only known settings; timeout_s and max_steps whole
 * numbers from 1 to 1000000; command is text; the adapter (default command) is known;
 * its own check passes; its CLI (bin, else default_bin) is a path or a name found on
 * envctl's folder or $PATH. Returns KA_OK, or KA_EINVAL / KA_ENOENT with the reason in
 * err. Reads the file system only; thread-safe. */
int ka_adapter_check(const json_t *cfg, char *err, size_t errlen);

/* Settings of an agent config (a JSON object; NULL allowed): the string at key when
 * it is a non-empty string, else dflt. */
const char *ka_cfg_str(const json_t *cfg, const char *key, const char *dflt);
/* The integer at key (an integer, or a string of one), else dflt. */
int ka_cfg_int(const json_t *cfg, const char *key, int dflt);
/* The boolean at key (true/false, or the string "true"), else dflt. */
int ka_cfg_bool(const json_t *cfg, const char *key, int dflt);

/* ------------------------------------------------------------------ transcripts */

/* Reads tokens and cost from a transcript: Claude Code / cursor-agent stream-json
 * (`result` events: total_cost_usd, usage, num_turns) and codex exec --json
 * (`turn.completed` events: usage). Adds the token counts to usage (object), sets
 * model_reported, num_turns, result_is_error, result_subtype and transcript_events on
 * agent, and returns the cost in USD, or NAN when the transcript reports none. */
double ka_transcript_usage(const char *path, json_t *usage, json_t *agent);

#endif
