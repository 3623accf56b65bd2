/* The Triton compile path (language triton, docs/tasks.md): ahead-of-time compilation of a
 * submission's @triton.jit kernels to cubins, in a sandboxed Python process that runs our
 * trusted driver (triton_compile.py, installed beside the binaries as
 * ka_triton_compile.py), and the rewrite of the launch plan onto what was compiled. No
 * submitted Python runs at evaluation time: the runner launches the cubins through the
 * cuda backend like NVRTC output (docs/integrity.md).
 *
 * Where things come from (the runner's environment, set by gpuexec):
 *   KA_TRITON_PYTHON   the Python that has triton (gpuexec --triton-python)
 *   KA_TRITON_PREFIX   the folders it reads (its sys.prefix and sys.base_prefix, ':'
 *                      between), which the sandbox's Landlock rules let it read
 *   KA_TRITON_SITE     the folder its triton package is in (PYTHONPATH of the driver)
 *   KA_TRITON_VERSION  its triton.__version__ (gpuexec probes it at start); part of the
 *                      cache key, and no cache without it
 *   KA_TRITON_CACHE    the compile cache folder (gpuexec --triton-cache); none if unset
 *   KA_TRITON_DRIVER   the driver script (tests); default <ka-runner's folder>/ka_triton_compile.py
 * Thread safety: the functions keep no state; one build at a time per workdir. */
#ifndef KA_TRITON_H
#define KA_TRITON_H

#include <stddef.h>

#include "backend.h"
#include "task.h"

#define KA_TRITON_DRIVER_NAME "ka_triton_compile.py"

/* Compiles the kernels that plan's launches name, with each launch's constexprs,
 * num_warps and num_stages and its args' types, from src (the task's source file, a
 * Python file) for arch ("sm_90"), in workdir (private, writable; the driver's files go
 * there), within timeout_s seconds (wall clock; the driver's process group is killed
 * then). Units that are equal (kernel, types, constexprs, warps, stages) are compiled
 * once. Looks the result up first in the cache (KA_TRITON_CACHE, keyed by the SHA-256 of
 * the triton version, arch, the driver script, the request and the source) and stores it
 * there after a compile.
 * On success *bundle (malloc'd, the caller frees) holds the image (triton_bundle.h),
 * *len its size, *cached 1 when it came from the cache. *log (malloc'd, the caller frees,
 * also on failure; may be NULL) gets notes and, for a failure of the submission, the last
 * lines of the driver's output (a Python traceback). Returns KA_OK; KA_ECOMPILE (the
 * submission's fault: an error in its source or plan, or the deadline) with the reason
 * in err; KA_EUNAVAIL (no Python with triton, no driver: infrastructure) or KA_ESYS / KA_EIO
 * (the sandbox or the files failed). */
int ka_triton_build(const ka_task *t, const ka_plan *plan, const ka_source *src, const char *arch,
                    const char *workdir, double timeout_s, void **bundle, size_t *len, int *cached,
                    char **log, char *err, size_t errlen);

/* Rewrites plan (parsed from triton task t's launch plan) onto bundle, the image that
 * ka_triton_build made from it: each launch's kernel becomes its unit's name, its block
 * 32 x the unit's num_warps, its shared_bytes the unit's; every launch gets Triton's two
 * trailing scratch pointers (global and profile scratch) as args, one zeroed scratch
 * buffer of the plan sized for the largest need (global scratch per program x programs);
 * plan->kernels become the unit names. Returns KA_OK, or KA_ECOMPILE with the reason in
 * err (a unit Triton compiled for what the runner cannot launch: clusters, cooperative
 * or PDL launches, profile scratch; or no room left in the plan), KA_EINVAL for a bundle
 * that does not match the plan. */
int ka_triton_plan_apply(const ka_task *t, ka_plan *plan, const void *bundle, size_t len, char *err,
                         size_t errlen);

/* The runner's step for a triton implementation: image (image_len bytes; a bundle from
 * the worker's build cache) or, when that is NULL, ka_triton_build(t, plan, src, ...) into
 * *built (malloc'd, the caller frees and loads it; NULL when image was given), then
 * ka_triton_plan_apply onto it. Returns either's codes; *log as ka_triton_build's. */
int ka_triton_prepare(const ka_task *t, ka_plan *plan, const ka_source *src, const void *image,
                      size_t image_len, const char *arch, const char *workdir, double timeout_s,
                      void **built, size_t *built_len, char **log, char *err, size_t errlen);

/* Asks python (a path, or a name looked up on PATH; the operator's, trusted: not
 * sandboxed) for triton: version gets triton.__version__, prefix the folders the compile
 * sandbox must let it read ("sys.prefix:sys.base_prefix:site", for KA_TRITON_PREFIX), exe its
 * sys.executable (an absolute path, for KA_TRITON_PYTHON); sets KA_TRITON_SITE (site: the
 * folder holding the triton package) in the environment. Returns
 * KA_OK, or KA_EUNAVAIL with the reason in err when it cannot import triton. Blocks until
 * the Python exits (about a second). */
int ka_triton_probe(const char *python, char *version, size_t vlen, char *prefix, size_t plen,
                    char *exe, size_t elen, char *err, size_t errlen);

/* Finds and probes the Python with triton for this process's runners: python, else
 * KA_TRITON_PYTHON, else the repository's venv beside the binaries (exedir/../../.venv),
 * else python3 on PATH; on success exports KA_TRITON_PYTHON, _PREFIX, _VERSION and
 * _CACHE (tcache, else cache_dir/triton) into the environment (worker.c passes them to
 * the runners). Once per process (later calls repeat the answer). Returns 1 with a
 * description in msg, or 0 with the reason. Not thread safe (setenv): call at start. */
int ka_triton_setup(const char *exedir, const char *cache_dir, const char *python,
                    const char *tcache, char *msg, size_t msglen);

/* The Triton type of a launch argument of task t ("*fp32", "i64", ...) into out, or -1
 * if name is no tensor, param or scratch buffer of plan. */
int ka_triton_arg_type(const ka_task *t, const ka_plan *plan, const char *name, char *out,
                       size_t outlen);

#endif
