/* Tasks of kind `command`: a folder in the seed system's (AgentKernelArena's) format,
 * config.yaml with list-valued compile_command / correctness_command /
 * performance_command, source_file_path, target_kernel_functions, task_type,
 * platform_support and *_timeout, loaded as it is (docs/tasks.md, "Command tasks").
 *
 * Such a task is a ka_task with mode "command", language "python" and t->command set;
 * its editable set is source_file_path, its baseline files are the folder's own files,
 * its id the folder's path under the tasks root. Everything else in the folder is the
 * harness: hashed at load (ka_command_spec.harness_hash), checked by the executor
 * before and after every command (gpuexec/daemon/command.c).
 * Thread safety: a loaded spec is immutable and may be shared between threads. */
#ifndef KA_TASK_COMMAND_H
#define KA_TASK_COMMAND_H

#include <stddef.h>

#include "task.h"

#define KA_CMD_MAX_COMMANDS 8          /* commands per phase */
#define KA_CMD_MAX_HARNESS 512         /* harness files per task */
#define KA_CMD_MAX_TARGETS 16          /* target_kernel_functions */
#define KA_CMD_DEFAULT_TIMEOUT_S 600.0 /* a phase without its *_timeout */
/* A case faster than this many times the baseline is FLAGGED, not rewarded: the task's
 * own scripts time code that runs beside them and can write their report
 * (docs/integrity.md, task-harness); config.yaml `max_speedup` sets another cap. */
#define KA_CMD_DEFAULT_MAX_SPEEDUP 10.0

/* The three phases, in the order they run. */
typedef enum ka_cmd_phase { KA_CMD_COMPILE, KA_CMD_CORRECTNESS, KA_CMD_PERFORMANCE } ka_cmd_phase;
#define KA_CMD_NPHASES 3

typedef struct ka_command_spec {
  char *commands[KA_CMD_NPHASES][KA_CMD_MAX_COMMANDS]; /* shell command lines (/bin/sh -c) */
  int ncommands[KA_CMD_NPHASES];
  double timeout_s[KA_CMD_NPHASES];  /* per command of the phase, seconds */
  double max_speedup;                /* the speedup cap (config.yaml max_speedup, > 1) */
  char *targets[KA_CMD_MAX_TARGETS]; /* target_kernel_functions (shown in the prompt) */
  int ntargets;
  char *instructions; /* config.yaml prompt.instructions (in the prompt), or NULL */
  /* harness files (relative paths, sorted) and the SHA-256 (hex) of each at load */
  char *harness[KA_CMD_MAX_HARNESS];
  char harness_sha[KA_CMD_MAX_HARNESS][65];
  int nharness;
} ka_command_spec;

/* Loads dir/config.yaml as a command task whose id is `id` (the folder's path under the
 * tasks root). Reads dir/prompt.md when present, else builds the prompt from the config.
 * The caller owns *out (ka_task_free). Returns KA_OK, KA_ENOENT, KA_EPARSE (file and
 * reason in err), KA_ETOOBIG (more than KA_CMD_MAX_HARNESS files) or KA_ENOMEM. */
int ka_command_task_load(const char *dir, const char *id, ka_task **out, char *err, size_t errlen);

/* Frees a spec (NULL is a no-op). */
void ka_command_spec_free(ka_command_spec *c);

/* Adds to r every command task found under r->root: each folder (any depth up to 6,
 * hidden folders skipped) that holds config.yaml and no task.yaml; a task folder's
 * sub-folders are not searched. Tasks that fail to load are skipped with a line on
 * stderr and recorded in r (ka_registry_skipped) when skip_bad is set, else the first
 * failure is returned (reason in err). Returns KA_OK, KA_ENOMEM or the load error. Not
 * thread-safe with other users of r. */
int ka_command_scan(ka_registry *r, int skip_bad, char *err, size_t errlen);

/* 1 if rel (a path in the task folder) is a report the commands write: build/NAME_report.json
 * or perf/benchmark_results.json. Such files are neither harness nor copied: a stale one
 * left in the folder is never read as a new evaluation's. Pure. */
int ka_command_is_output(const char *rel);

/* Compares the harness files under root (a copy of the task folder) with the hashes of
 * t's spec. Returns 0 if all are present and unchanged, else 1 with the first changed
 * or missing file's path in what. */
int ka_command_harness_changed(const ka_task *t, const char *root, char *what, size_t whatlen);

#endif
