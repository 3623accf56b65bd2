/* ka-runner internals shared by its main (runner.c) and the case evaluation
 * (runner_case.c). Not a public interface: one process, one thread. */
#ifndef KA_RUNNER_CASE_H
#define KA_RUNNER_CASE_H

#include <stddef.h>

#include "backend.h"
#include "devlock.h"
#include "ka_common.h"
#include "kernelarena.pb-c.h"
#include "task.h"

#define RN_ERRLEN 2048

/* The runner's device and task, for the whole evaluation. */
typedef struct rn_state {
  const ka_backend_ops *be;
  ka_backend_ctx *ctx;
  ka_device_info dev;
  const ka_task *task;
  ka_sb log; /* runtime log */
  /* a launch of the candidate was enqueued in this evaluation (any case): device faults
   * from then on are its verdict (runner_case.c, rn_blame) */
  int candidate_ran;
  /* the backend's untimed_work totals already judged (0 at the start: everything since
   * the modules were loaded counts, also between cases) */
  double busy_mark, idle_mark;
  /* the device lock (devlock.h): shared around untimed device work, exclusive around
   * the cache flush and timed call; m -1 without one */
  ka_devlock lock;
  /* monotonic ns since which the candidate's work is on the device (0: none); runner.c's
   * call watchdog ends the runner with TIMEOUT when it passes the job's call limit */
  _Atomic long long cand_since_ns;
  int image_fd;      /* the worker's memfd for the baseline's image (runner.c), or -1 */
  int cand_image_fd; /* the worker's memfd for the candidate's image (runner.c), or -1 */
  int trial_fd;      /* RunnerJob.trial_fd's pipe (runner.c), or -1 */
} rn_state;

/* One implementation: impl[0] the baseline, impl[1] the candidate. */
typedef struct rn_impl {
  const char *label; /* "baseline" or "candidate" */
  ka_plan *plan;
  ka_module *mod;
} rn_impl;

/* The secrets of one case of a job. in: the seed of the timed calls' inputs, from the
 * job's seed (RunnerJob.poison_seed, which the worker draws per evaluation; ka-validate's
 * fixed inputs need it reproducible). The others only this runner needs, each drawn
 * anew from the kernel's generator (getrandom), unrelated to the job's seed and to one
 * another: the poison (the candidate reads it in its outputs, and splitmix64 chains are
 * invertible: red team 2026-12-01 inverted an i64 output's poison back to the seed of
 * every timed call's inputs when all were derived from one seed), the host pool's
 * rotation, the verification draw and the checksum keys. Without getrandom: the job's
 * seed mixed with the clock. reproducible (RunnerJob.reproducible, an admin's
 * reproducible Evaluate): all of them from the job's seed, the same on every call; the
 * poison then leads back to the inputs, which that mode gives up by design
 * (docs/integrity.md, "Reproducible evaluations"). Thread safe. */
typedef struct rn_seeds {
  uint64_t in, poison, rot, ver, sum, trial_sum;
} rn_seeds;
void rn_case_seeds(uint64_t job_seed, int ci, int reproducible, rn_seeds *out);

/* The standard error of the median log speedup log(base_ms[r] / cand_ms[r]) over
 * r < n, estimated robustly (the adaptive repetition's stopping rule, runner_case.c
 * RN_RSE_TARGET): sigma = 1.4826 x the median absolute deviation (consistent for the
 * normal: Rousseeuw and Croux, JASA 88(424), 1993), and the sample median's asymptotic
 * standard error sqrt(pi / 2) sigma / sqrt(n), i.e. 1 / (2 f(m) sqrt(n)) for a normal
 * density f. A rare slow call moves neither the median nor this estimate, where it blows
 * up the mean's standard error. Where more than half the ratios are equal (the MAD 0: a
 * kernel of a few timer ticks) sigma is their root mean square deviation from the median
 * instead. A fraction (log ratio, not percent); 0 for n < 2 or every ratio equal; NaN if
 * a ratio is not finite (a time 0, NaN or infinite). *outliers (may be NULL): the
 * repetitions more than 5 sigma from the median. scratch: 2 n doubles, overwritten.
 * Thread safe (no state). */
double rn_median_se_of(const double *base_ms, const double *cand_ms, int n, double *scratch,
                       int *outliers);

/* The backend's last error text ("" without one). */
const char *rn_be_err(rn_state *s);

/* Device facts usable in launch-plan expressions (sm_count, warp_size, ...). */
void rn_device_vars(const ka_device_info *d, ka_vars *v);

/* Evaluates case ci of job (docs/integrity.md): the candidate's correctness trial on the
 * worker's inputs (outputs written back to the worker's memfds), then baseline and
 * candidate interleaved in timed calls on inputs drawn anew for every call, each call
 * checked for changed inputs, the candidate's outputs of a secret-seeded half of the
 * timed calls (drawn after the calls where they can be kept) compared with the baseline's
 * on the same inputs at the task's tolerance (the timings reported are those of the
 * verified calls), then the integrity checks on the timings.
 * Fills cr (timings, reps, verified calls; the caller owns it and set its name). Returns
 * KA_OK with *status OK, or an error with *status the verdict and the reason in err. */
int rn_case(rn_state *s, const Kernelarena__V1__RunnerJob *job, int ci, rn_impl *impl,
            Kernelarena__V1__CaseResult *cr, int *status, char *err, size_t errlen);

#endif
