/* The executor's half of command tasks (common/task_command.h): one evaluation runs the
 * task's compile, correctness and performance commands in a sandboxed copy of the task
 * folder and scores their reports by the seed system's rules (docs/tasks.md). */
#ifndef KA_COMMAND_H
#define KA_COMMAND_H

#include <limits.h>

#include "devlock.h"
#include "gpuexec.h"
#include "kernelarena.pb-c.h"
#include "task.h"

/* The most pairs of performance runs of gpuexec --command-pairs (ka_exec_config). */
#define KA_CMD_PAIRS_MAX 16

/* The integrity level of every command task's result (docs/integrity.md). */
#define KA_INTEGRITY_TASK_HARNESS "task-harness"

/* Evaluates job (a command task t, t->command set) on dev and fills *res, which the caller
 * initialised (job_id and device may already be set). The baseline's per-case times are
 * measured once per (task version, device) and kept in this process; with
 * cfg->command_pairs >= 2 the step is scored instead by the per-case medians of that many
 * pairs of performance runs, the baseline's and the candidate's alternated (ABBA), and
 * falls back to the kept times if a run of the baseline fails. Never fails: a fault
 * of the submission is its verdict (COMPILE_ERROR, INCORRECT, RUNTIME_ERROR, TIMEOUT,
 * FLAGGED), a fault of ours or of the task's own baseline is INFRA_ERROR. Thread safe. */
void ka_command_evaluate(const ka_exec_config *cfg, const Kernelarena__V1__Device *dev,
                         const Kernelarena__V1__Job *job, const ka_task *t, ka_devlock *lock,
                         Kernelarena__V1__Result *res);

/* The sysfs-like folder with one sub-folder per NVIDIA GPU (named by PCI address, each
 * with an `information` file that has a "Device Minor:" line). */
#define KA_NVIDIA_GPUS_DIR "/proc/driver/nvidia/gpus"

#define KA_CMD_MAX_NODES 8
#define KA_CMD_MAX_RO 8

/* What the commands of one evaluation get (ka_cmd_env_init): their environment, the
 * device nodes their sandbox opens to them, the folders of their PATH (read-only). Built
 * before fork, so that the child allocates nothing. */
typedef struct ka_cmd_env {
  char workdir[PATH_MAX];
  char *envp[16]; /* NULL-terminated, pointing into the buffers below */
  char path[1024], home[PATH_MAX + 8], tmp[PATH_MAX + 8], visible[64];
  char node_buf[KA_CMD_MAX_NODES][64];
  const char *nodes[KA_CMD_MAX_NODES + 1]; /* NULL-terminated; nodes[0] NULL on host */
  int gpu;                                 /* 1: the sandbox opens nodes (cuda, hip) */
  char ro_buf[1024];
  char python_home[PATH_MAX];        /* the installation of path_prefix's python3 */
  char venv_root[PATH_MAX];          /* the venv a path_prefix folder is the bin of */
  const char *ro[KA_CMD_MAX_RO + 1]; /* the absolute folders of path_prefix, venv_root and
                                        python_home, NULL-terminated */
  char note[160];                    /* how the device node was found (for the log) */
} ka_cmd_env;

/* Fills *e for commands run in workdir on device backend:index. PATH is path_prefix (a
 * colon-separated list of folders, e.g. a venv's bin; NULL or "" for none) before
 * /usr/local/bin:/usr/bin:/bin; the folders of path_prefix and the installation of its
 * first python3 (realpath, two levels up) are readable in the sandbox (e->ro), and so is
 * the venv whose bin the first of them is (its folder holds pyvenv.cfg: its lib/ and
 * site-packages, torch's, are outside bin/). On cuda:
 * CUDA_VISIBLE_DEVICES=index and the nodes /dev/nvidiactl, /dev/nvidia-uvm
 * and /dev/nvidiaM, M the minor of the index-th GPU (in PCI order: CUDA's order for GPUs of one
 * model) under gpus_dir (KA_NVIDIA_GPUS_DIR; else M = index, said in e->note). On hip:
 * HIP_VISIBLE_DEVICES=index, /dev/kfd and /dev/dri/renderD(128 + index). Where gpuexec
 * itself runs under CUDA_VISIBLE_DEVICES (HIP_VISIBLE_DEVICES), index counts within that
 * mask and the physical number it names takes its place above. Host: no device, no
 * nodes. Returns KA_OK, KA_EINVAL (a path too long) or KA_EUNAVAIL (a mask of UUIDs or
 * without that entry; e->note says so). Pure but for reading gpus_dir and the
 * environment; thread safe. */
int ka_cmd_env_init(ka_cmd_env *e, const char *backend, int index, const char *path_prefix,
                    const char *workdir, const char *gpus_dir);

/* One timed case of a performance report. */
typedef struct ka_cmd_case {
  char name[128];
  double ms;      /* the candidate's (the code in the folder's) time, ms */
  double base_ms; /* the report's own baseline time (ori_time), ms; 0 if none */
} ka_cmd_case;

/* Parses a performance report (JSON text) by the seed system's rules: a list of cases, an
 * object with a `cases` or `results` list, or one object (one case); each case's time is
 * the first present of execution_time_ms, timing_ms.mean, opt_time (with ori_time as the
 * report's baseline), time_ms, mean_ms, latency_ms. A case that gives only host
 * wall-clock keys (any key with "wall", host_time_ms, elapsed_s) is refused. Fills
 * out[0..max) and returns the count (>= 1), or -1 with the reason in why. Pure. */
int ka_cmd_parse_perf(const char *text, size_t len, ka_cmd_case *out, int max, char *why,
                      size_t whylen);

#endif
