/* Shared between gpuexec and ka-runner: how a runner is started and what it returns.
 *
 * gpuexec writes one encoded Kernelarena__V1__RunnerJob to the runner's stdin and
 * closes it; the runner writes one encoded Kernelarena__V1__RunnerResult to
 * KA_RUNNER_RESULT_FD and exits 0. Input tensors arrive as inherited memfds (read
 * only for the runner's purposes); output tensors are memfds the runner fills with
 * the candidate's outputs. `ka-runner --discover BACKEND` instead writes an encoded
 * Kernelarena__V1__DescribeResponse listing that backend's devices to stdout. */
#ifndef KA_RUNNER_H
#define KA_RUNNER_H

#define KA_RUNNER_RESULT_FD 3
#define KA_RUNNER_MAX_JOB_BYTES (64u << 20)

#endif
