/* Shared between gpuexec and ka-runner: how a runner is started and what it returns.
 *
 * gpuexec writes one encoded Kernelarena__V1__RunnerJob to the runner's stdin and
 * closes it; the runner writes one encoded Kernelarena__V1__RunnerResult to
 * KA_RUNNER_RESULT_FD and exits 0. Input tensors arrive as inherited memfds (read
 * only for the runner's purposes); output tensors are memfds the runner fills with
 * the candidate's outputs. `ka-runner --discover BACKEND` instead writes an encoded
 * Kernelarena__V1__DescribeResponse listing that backend's devices to stdout.
 *
 * The runner is trusted; submitted code never runs in its process (host modules run in
 * child processes, GPU kernels on the device), and it makes itself non-dumpable, so a
 * submission can neither write KA_RUNNER_RESULT_FD nor reach it through /proc. */
#ifndef KA_RUNNER_H
#define KA_RUNNER_H

#define KA_RUNNER_RESULT_FD 3
#define KA_RUNNER_MAX_JOB_BYTES (64u << 20)

/* `ka-runner --host-module SO KERNEL...`: the process in which the host backend runs a
 * compiled module (backend_host.c starts it; stdin is its command socket, stderr the
 * runner's log; it holds no other descriptor and none of the runner's memory). */
#define KA_RUNNER_HOST_MODULE_ARG "--host-module"

/* Main of that process (backend_host.c). Returns the exit status. */
int ka_host_module_main(int argc, char **argv);

#endif
