/* Task model: a task directory (task.yaml, baseline/, reference.c, prompt.md) loaded
 * with libyaml, and the launch plan of rtc-mode submissions.
 *
 * task.yaml (docs/tasks.md is the reference):
 *   id, type (hip2hip|cuda2cuda|triton2triton|host), language (hip|cuda|triton|c),
 *   mode (rtc|module; triton: rtc),
 *   backends, description, params [{name, type: i32|i64}],
 *   tensors [{name, dtype, shape: [expr...], role: input|output, init: {dist,...}}],
 *   tolerance {atol, rtol} (an output tensor may override either with its own
 *   atol/rtol), nondeterministic (a reason), fresh_inputs (true|false),
 *   cases / held_out [{name, <param>: value...}],
 *   editable [files], source (file compiled), launch_plan (rtc: editable file),
 *   entry {symbol, args} (module), reference {symbol}, timeout_s, bytes, flops,
 *   tags [words] (optional, at most KA_MAX_TAGS), allowed_imports / denied_imports
 *   [glob patterns] (optional, module mode, at most KA_MAX_IMPORTS each).
 * Thread safety: a loaded ka_task is immutable and may be shared between threads. */
#ifndef KA_TASK_H
#define KA_TASK_H

#include <stddef.h>
#include <stdint.h>

#include "expr.h"

#define KA_MAX_PARAMS 16
#define KA_MAX_TENSORS 16
#define KA_MAX_DIMS 6
#define KA_MAX_ARGS 32
#define KA_MAX_LAUNCHES 16
#define KA_MAX_SCRATCH 8
#define KA_MAX_EDITABLE 8
#define KA_MAX_TAGS 8
#define KA_MAX_IMPORTS 32 /* patterns in allowed_imports / denied_imports */

typedef enum ka_dtype {
  KA_DT_F32,
  KA_DT_F64,
  KA_DT_F16,
  KA_DT_BF16,
  KA_DT_I8,
  KA_DT_U8,
  KA_DT_I32,
  KA_DT_I64,
} ka_dtype;

/* Bytes per element of dtype. */
size_t ka_dtype_size(ka_dtype dt);
/* "f32", "bf16", ...; parse returns KA_OK or KA_EPARSE. */
const char *ka_dtype_name(ka_dtype dt);
int ka_dtype_parse(const char *s, ka_dtype *out);

typedef enum ka_role { KA_ROLE_INPUT, KA_ROLE_OUTPUT } ka_role;
typedef enum ka_dist { KA_DIST_NORMAL, KA_DIST_UNIFORM, KA_DIST_RANDINT } ka_dist;

typedef struct ka_tensor_spec {
  char *name;
  ka_dtype dtype;
  ka_role role;
  int ndim;
  char *shape[KA_MAX_DIMS]; /* expressions over params */
  ka_dist dist;             /* inputs only */
  double a, b; /* normal: mean, std; uniform/randint: low, high (inclusive for randint) */
  /* a, b as integer expressions over params (e.g. "vocab - 1"), or NULL where the
   * yaml gives a number; evaluated per case by ka_fill_input through `task`. */
  char *init_expr[2];
  const struct ka_task *task; /* the task holding this spec (NULL for a bare spec) */
  /* outputs only: own tolerance (task.yaml `atol`/`rtol` on the tensor), else the task's;
   * read them through ka_task_tolerance */
  double atol, rtol;
  int has_atol, has_rtol;
} ka_tensor_spec;

typedef struct ka_param_spec {
  char *name;
  int is_i32; /* passed to kernels as int32 (else int64) */
} ka_param_spec;

typedef struct ka_case {
  char *name;
  int64_t values[KA_MAX_PARAMS]; /* in task params order */
  int held_out;
} ka_case;

typedef struct ka_task {
  char *id, *type, *language, *mode, *description, *dir, *version;
  char *backends[4];
  int nbackends;
  int nparams, ntensors, ncases, nheld;
  ka_param_spec params[KA_MAX_PARAMS];
  ka_tensor_spec tensors[KA_MAX_TENSORS];
  ka_case *cases;    /* ncases shown then nheld held-out, contiguous */
  double atol, rtol; /* |out-ref| <= atol * max|ref| + rtol * |ref| (scale-aware) */
  char *editable[KA_MAX_EDITABLE];
  int neditable;
  char *source;       /* editable file that is compiled */
  char *launch_plan;  /* rtc: editable launch-plan file; NULL in module mode */
  char *entry_symbol; /* module: C entry point */
  char *entry_args[KA_MAX_ARGS];
  int nentry_args;
  char *reference_symbol;
  /* `reference: {split: P}`: the reference may be computed on slices of param P's range
   * (rows, say), each on its own thread: every tensor whose leading dimension is exactly
   * P is cut there (ref_sliced bit k), every other tensor is passed whole and must not
   * name P; every output is cut. ref_split is P's index, or -1 (no split). The reference
   * must give the same values sliced as whole (tests/reference_split_test.c checks). */
  int ref_split;
  unsigned ref_sliced;
  double timeout_s;
  char *bytes_expr, *flops_expr; /* optional, for the physics floor */
  char *prompt;                  /* prompt.md contents */
  char *tags[KA_MAX_TAGS];       /* `tags:` (e.g. elementwise, reduction, cpu); may be empty */
  int ntags;
  /* `nondeterministic: REASON`: the baseline's outputs may differ bitwise between two
   * runs on one seed (e.g. float atomics); NULL when the task is bitwise repeatable */
  char *nondeterministic;
  /* `fresh_inputs: true`: every timed call gets newly drawn inputs, never a rotation of
   * the worker's, however large they are (gpuexec/runner/runner.c; for ops whose output a
   * rotation of the input does not change, e.g. a histogram, docs/integrity.md 3) */
  int fresh_inputs;
  /* a `starter/` folder beside `baseline/` (instruction2triton): the workspace starts from
   * starter/'s editable files (a specification and empty kernel bodies), and baseline/
   * stays hidden: only the runner reads it, as the timed baseline (docs/tasks.md) */
  int has_starter;
  /* module mode: glob patterns (fnmatch) of imported symbols the built shared object may
   * use besides the default list (`allowed_imports:`), and patterns it may not use even
   * when on the default list (`denied_imports:`; wins); gpuexec/sandbox/sandbox.h */
  char *allowed_imports[KA_MAX_IMPORTS], *denied_imports[KA_MAX_IMPORTS];
  int nallowed_imports, ndenied_imports;
  /* a task of kind `command` (a config.yaml folder, common/task_command.h), else NULL */
  struct ka_command_spec *command;
} ka_task;

/* Loads dir/task.yaml, dir/prompt.md and checks that the baseline files exist and the
 * schema is complete. The caller owns *out (ka_task_free). Returns KA_ENOENT,
 * KA_EPARSE (with file, line and reason in err) or KA_ENOMEM. */
int ka_task_load(const char *dir, ka_task **out, char *err, size_t errlen);
void ka_task_free(ka_task *t);

/* Index of a param / tensor by name, or -1. */
int ka_task_param(const ka_task *t, const char *name);
int ka_task_tensor(const ka_task *t, const char *name);

/* The path of the starting version of editable file `file` (what a workspace, a step's
 * files left out and GetTaskInfo hold) into buf: dir/starter/file for a task with a
 * starter (its baseline/ is hidden then), dir/file for a command task (its folder holds
 * them), else dir/baseline/file. Returns buf. Pure. */
char *ka_task_baseline_path(const ka_task *t, const char *file, char *buf, size_t len);

/* 1 if path is one of the task's editable files. */
int ka_task_is_editable(const ka_task *t, const char *path);

/* Fills vars with the case's params. Names are borrowed from t. */
void ka_task_case_vars(const ka_task *t, const ka_case *c, ka_vars *vars);

/* The tolerance that judges output tensor i: the tensor's own `atol`/`rtol` where
 * task.yaml gives them, else the task's `tolerance`. Element k passes iff
 * |out - ref| <= atol * max|ref| + rtol * |ref| (common/data.h, ka_compare_outputs). */
void ka_task_tolerance(const ka_task *t, int i, double *atol, double *rtol);

/* The init numbers of input tensor i for case c: *a, *b as for ka_tensor_spec (mean and
 * std, or low and high), with any expression (init_expr) evaluated over c's params.
 * Returns KA_OK, or the expression's error (KA_EPARSE, KA_ERANGE) with the reason in err;
 * KA_ERANGE also when low > high. ka_task_load checks every case, so for a loaded task
 * and one of its cases this cannot fail. */
int ka_task_init_bounds(const ka_task *t, int i, const ka_case *c, double *a, double *b, char *err,
                        size_t errlen);

/* Element count of tensor i for case c. Returns KA_OK or an expression error. */
int ka_task_tensor_elems(const ka_task *t, int i, const ka_case *c, int64_t *elems, char *err,
                         size_t errlen);

/* A task folder that failed to load and was skipped: its id (its path under the
 * registry's root, as a loaded task's would be) and why. */
typedef struct ka_registry_skip {
  char *id;
  char *reason;
} ka_registry_skip;

/* A task registry: every task.yaml found under root (recursively, two levels:
 * root/<family>/<name>/task.yaml), and every command task (a config.yaml folder at any
 * depth up to 6, its id the folder's path under root; common/task_command.h). Tasks
 * that fail to load are reported in err and skipped only when skip_bad is set;
 * otherwise loading fails. Skipped folders are also kept in `skipped` (in the order
 * found), so that a later request for one can say why it is missing. */
typedef struct ka_registry {
  int ntasks;
  ka_task **tasks;
  char *root;
  int nskipped;
  ka_registry_skip *skipped;
} ka_registry;

/* Loads the registry of root into *out (the caller owns it: ka_registry_free). With
 * skip_bad, a task that fails to load is skipped with a line on stderr ("kernelarena:
 * skipping task DIR: WHY") and recorded in (*out)->skipped; without it the first
 * failure is returned. Returns KA_OK, KA_ENOENT (root cannot be opened), KA_ENOMEM, or a
 * task's load error (without skip_bad), with the reason in err; *out is NULL on error. */
int ka_registry_load(const char *root, int skip_bad, ka_registry **out, char *err, size_t errlen);

/* Frees r with its tasks and skip records (NULL is a no-op). */
void ka_registry_free(ka_registry *r);

/* The loaded task of that id, or NULL (r or id NULL, or no such task). Borrowed from r. */
const ka_task *ka_registry_find(const ka_registry *r, const char *id);

/* Why the task folder of that id was skipped when r was loaded (ka_registry_load with
 * skip_bad), or NULL when it was not (r or id NULL, a loaded task, or no such folder).
 * The text is borrowed from r, valid until ka_registry_free. Not thread-safe with
 * ka_registry_add_skip on the same r; safe with other readers. */
const char *ka_registry_skipped(const ka_registry *r, const char *id);

/* Records that the task folder dir, of that id, was skipped, and why (copied into r,
 * every occurrence of dir in reason replaced by id: the reason reaches clients in
 * "unknown task" errors, which should not show the server's paths). For the loaders of
 * ka_registry_load (common/task.c, common/task_command.c). Returns KA_OK or KA_ENOMEM
 * (r unchanged). */
int ka_registry_add_skip(ka_registry *r, const char *id, const char *dir, const char *reason);

/* ---- launch plans (rtc mode) */

typedef struct ka_plan_scratch {
  char *name;
  ka_dtype dtype;
  char *count; /* expression */
} ka_plan_scratch;

typedef struct ka_plan_launch {
  char *kernel;
  char *grid[3], *block[3]; /* expressions; missing dims are "1" */
  char *shared_bytes;
  char *args[KA_MAX_ARGS]; /* tensor, param or scratch names */
  int nargs;
  /* language triton only (docs/tasks.md): the compile options of this launch's kernel.
   * num_warps (1..32, a power of 2; block = 32 x num_warps), num_stages (1..8), and the
   * constexpr parameters by name, each an integer literal or true/false (as text); block
   * and shared_bytes then come from the compile (gpuexec/backends/triton.h) */
  int num_warps, num_stages;
  char *constexpr_names[KA_MAX_ARGS], *constexpr_values[KA_MAX_ARGS];
  int nconstexprs;
} ka_plan_launch;

typedef struct ka_plan {
  char *kernels[KA_MAX_LAUNCHES];
  int nkernels;
  ka_plan_scratch scratch[KA_MAX_SCRATCH];
  int nscratch;
  ka_plan_launch launches[KA_MAX_LAUNCHES];
  int nlaunches;
} ka_plan;

/* Parses launch-plan YAML text (untrusted: bounded sizes, every name checked against
 * the task). Returns KA_OK or KA_EPARSE with the reason in err. Caller owns *out. */
int ka_plan_parse(const ka_task *t, const char *yaml, size_t len, ka_plan **out, char *err,
                  size_t errlen);

/* The module-mode plan: one launch of entry_symbol with entry_args, grid = block = 1. */
int ka_plan_from_entry(const ka_task *t, ka_plan **out, char *err, size_t errlen);
void ka_plan_free(ka_plan *p);

#endif
