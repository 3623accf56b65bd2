/* The trusted PyTorch process of the torch task families (torch2cuda, torch2triton;
 * docs/tasks.md, "PyTorch tasks"): gpuexec/torch/ka_torch.py, started by the executor
 * (never by a runner, never in a candidate's process), spoken to over two pipes, one
 * JSON object per line each way (the protocol is ka_torch.py's docstring).
 *
 * It computes a task's reference from its model.py in float64 on the job's device, and
 * times PyTorch eager (or torch.compile) on the same device under the device lock of
 * devlock.h, each call flushed and timed by CUDA events, as a runner times its own.
 *
 * Errors: KA_EUNAVAIL (the Python cannot be run, torch is absent from it, or torch sees
 * no CUDA device: err says which, never a silent skip), KA_EINVAL (a request the process
 * refused: a bad model.py, a shape that disagrees with task.yaml), KA_EDEVICE (torch
 * failed on the device), KA_ETIMEDOUT (no reply within the limit: the process is
 * killed), KA_EIO (the process exited; err holds the end of its stderr), KA_EPARSE (a
 * reply that is not the protocol's), KA_ESYS, KA_ENOMEM.
 * The caller ignores SIGPIPE (gpuexec, ka-validate and envctl do), so that a request to a
 * process that has ended is KA_EIO, not the caller's death.
 * Thread safety: one ka_torch is used by one thread at a time; distinct ones are
 * independent. */
#ifndef KA_TORCHPROC_H
#define KA_TORCHPROC_H

#include <stddef.h>
#include <stdint.h>

#include "task.h"

typedef struct ka_torch ka_torch;

/* What the process reported at start. */
typedef struct ka_torch_info {
  char torch[32];        /* torch.__version__, e.g. "2.11.0" */
  char cuda[32];         /* torch.version.cuda ("" for a CPU build) */
  char device_name[128]; /* e.g. "NVIDIA H200", or "cpu" */
  char python[32];       /* the interpreter's version */
} ka_torch_info;

/* Starts `python script [--lock-fds 3,4]` and says hello: device "cuda" (the default
 * when NULL; the process sees the devices the caller's environment shows it, so set
 * CUDA_VISIBLE_DEVICES to the job's) or "cpu" (references only). lock_m, lock_t: the
 * device lock's files (devlock.h; the process opens descriptions of its own), or -1
 * for none. timeout_s (> 0): the limit on every reply, this hello's included (a
 * torch.compile of a module takes tens of seconds). On success *out is owned by the
 * caller (ka_torch_stop) and *info (may be NULL) filled. On failure *out is NULL and
 * the process is gone. */
int ka_torch_start(const char *python, const char *script, const char *device, int lock_m,
                   int lock_t, double timeout_s, ka_torch **out, ka_torch_info *info, char *err,
                   size_t errlen);

/* Loads the task's model.py (t->dir) for case c: the inputs' and outputs' dtypes, shapes
 * (evaluated for c) and init numbers. KA_OK or an error above. */
int ka_torch_load(ka_torch *tp, const ka_task *t, const ka_case *c, char *err, size_t errlen);

/* The reference of the loaded case, in the reference ABI (docs/tasks.md): tensors[i] is
 * tensor i of the task; inputs hold their dtype, outputs are double arrays of their
 * element count, filled here. The tensors travel through files of a private folder
 * (removed before return). *bits (may be NULL): 64, or 32 where the process had to
 * compute in float32 (an op without a float64 kernel). */
int ka_torch_reference(ka_torch *tp, void *const *tensors, int *bits, char *err, size_t errlen);

/* Times `calls` calls (after `warmup` untimed ones) of the loaded case's Model, mode
 * "eager" or "compile", on inputs the process draws from seed: ms[0..calls) in
 * milliseconds (CUDA events), *compile_s the first call's wall time in mode compile (0
 * in eager; may be NULL). */
int ka_torch_time(ka_torch *tp, const char *mode, int calls, int warmup, uint64_t seed, double *ms,
                  double *compile_s, char *err, size_t errlen);

/* Asks the process to quit, waits up to a second, then kills it; frees tp. NULL is a
 * no-op. */
void ka_torch_stop(ka_torch *tp);

#endif
