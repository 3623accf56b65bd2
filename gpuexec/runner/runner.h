/* Shared between gpuexec and ka-runner: how a runner is started and what it returns.
 *
 * gpuexec writes one encoded Kernelarena__V1__RunnerJob to the runner's stdin (a Unix
 * socket) and shuts it down; the runner writes one encoded Kernelarena__V1__RunnerResult
 * to KA_RUNNER_RESULT_FD and exits 0. Input tensors arrive with the job as memfds
 * (sealed: nobody can change them), except where the runner draws the trial's inputs on
 * the device (Device.device_staging: no input memfd at all); output tensors are memfds the runner
 * fills with the candidate's outputs. A runner may be started before its job
 * (KA_RUNNER_PREOPEN_ENV). `ka-runner
 * --discover BACKEND` instead writes an encoded Kernelarena__V1__DescribeResponse listing that
 * backend's devices to stdout.
 *
 * The runner is trusted; submitted code never runs in its process (host modules run in
 * child processes, GPU kernels on the device), and it makes itself non-dumpable, so a
 * submission can neither write KA_RUNNER_RESULT_FD nor reach it through /proc. */
#ifndef KA_RUNNER_H
#define KA_RUNNER_H

#define KA_RUNNER_RESULT_FD 3

/* The FLAGGED reasons that another evaluation on a shared device could cause, as they
 * appear in CaseResult.flag (runner_case.c, worker.c): a host wall clock delayed by the
 * neighbours' host work, and a baseline slower than its history (a host backend's CPU
 * shared). The worker evaluates such a verdict again alone (worker.c, ka_evaluate); the
 * others (work outside the calls, the physics floor, a timer faster than the wall clock)
 * no neighbour causes, and a second try would only give a cheat a second chance. */
#define KA_FLAG_WALL "work outside the timed stream"
#define KA_FLAG_HISTORY "disagrees with its history on this device"
#define KA_RUNNER_MAX_JOB_BYTES (64u << 20)
/* The job's memfds travel with it over the runner's stdin (a Unix socket) as SCM_RIGHTS,
 * at most KA_RUNNER_FDS_PER_MSG per message; the RunnerCase fd fields are then indices
 * into the received fds, in order (RunnerJob.fds_passed). */
#define KA_RUNNER_FDS_PER_MSG 200
#define KA_RUNNER_MAX_FDS 1024
/* Environment of a runner started ahead of its job (gpuexec's pool): "BACKEND:INDEX",
 * the device it opens (CUDA context and all) before it reads the job. The open takes no
 * device lock (devlock.h): a context made or destroyed in another process beside a timed
 * call left the baseline's self-speedup where it was on the H200 (tests/device/
 * churn_h200.sh, docs/benchmarks/2026-12-02-session19-h200.md). */
#define KA_RUNNER_PREOPEN_ENV "KA_RUNNER_PREOPEN"

/* `ka-runner --host-module SO KERNEL...`: the process in which the host backend runs a
 * compiled module (backend_host.c starts it; stdin is its command socket, stderr the
 * runner's log; it holds no other descriptor and none of the runner's memory). */
#define KA_RUNNER_HOST_MODULE_ARG "--host-module"

/* Main of that process (backend_host.c). Returns the exit status. */
int ka_host_module_main(int argc, char **argv);

/* The fields of a CaseResult that the runner measures and the worker passes on as they
 * are (an X-macro: X(field) for each; KA_CASE_TIMINGS_COPY copies them all). */
/* clang-format off */
#define KA_CASE_TIMINGS(X) \
  X(baseline_ms) \
  X(candidate_ms) \
  X(candidate_wall_ms) \
  X(floor_ms) \
  X(timed_calls) \
  X(verified_calls) \
  X(verified_after_calls)
/* clang-format on */
#define KA_CASE_TIMING_COPY(f) dst_->f = src_->f;
/* Copies the measured fields of the CaseResult src into dst (both pointers). */
#define KA_CASE_TIMINGS_COPY(dst, src)               \
  do {                                               \
    Kernelarena__V1__CaseResult *dst_ = (dst);       \
    const Kernelarena__V1__CaseResult *src_ = (src); \
    KA_CASE_TIMINGS(KA_CASE_TIMING_COPY)             \
  } while (0)

#endif
