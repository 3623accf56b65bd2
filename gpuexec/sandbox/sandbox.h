/* The sandbox of an evaluation: what ka-runner does to itself before submitted code is
 * compiled or run, and the supervisor process that gpuexec starts around it.
 *
 * Layers (docs/sandbox.md describes each, what it covers and what it does not):
 *   1. gpuexec (worker.c) starts `ka-runner --supervise`: a supervisor in its own
 *      process group, a child subreaper (PR_SET_CHILD_SUBREAPER), with rlimits and a
 *      scrubbed environment. It forks the real runner and, when the runner ends or the
 *      deadline comes, kills every process the runner left behind (setsid() or double
 *      fork do not escape it) and reports how many on KA_SANDBOX_STATUS_FD.
 *   2. The include allowlist: every #include of a submission must name a header of
 *      the task language's allowlist or another editable file of the task.
 *   3. Landlock (when the kernel has it): the runner may read system directories and
 *      write only its private workdir and /dev; the task folder, the trace store and
 *      other evaluations' folders are out of reach, as is ptrace of outside processes.
 *   4. seccomp-BPF (libseccomp), in two stages. First: no sockets (socketpair(AF_UNIX)
 *      only), no ptrace, no privileged system calls. Second, the lock (in the runner
 *      for rtc tasks, in each host module process before it loads submitted code): no
 *      new process (fork, vfork, clone without CLONE_THREAD), no execve (such a call
 *      stops the process with SIGSYS), no setsid/setpgid, signals only to itself, no
 *      limits, priority or CPUs of another process, no System V IPC.
 *   5. Host backend: every module process (baseline's and candidate's) sandboxes
 *      itself (ka_sandbox_module); the C compiler runs in a sandbox of its own
 *      (ka_sandbox_compiler) and its assembly is checked (ka_asm_check).
 *   6. Where permitted (CAP_SYS_ADMIN), the runner gets mount and IPC namespaces of its
 *      own with a fresh tmpfs on /dev/shm, which end with the evaluation.
 *
 * The operator (never the submission) can turn layers 3 and 4 off for diagnosis with
 * KA_SANDBOX_LANDLOCK=0 / KA_SANDBOX_SECCOMP=0 in gpuexec's environment, and allow
 * AF_UNIX sockets with KA_SANDBOX_UNIX=1 should a driver need them after its setup. */
#ifndef KA_SANDBOX_H
#define KA_SANDBOX_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "kernelarena.pb-c.h"
#include "task.h"

/* Descriptor on which the supervisor writes its one-line report to gpuexec:
 * first "pid <runner pid>\n" once the runner is started, then
 * "runner <wait status> leftovers <n> deadline <0|1>\n" when it is over. */
#define KA_SANDBOX_STATUS_FD 4

/* First argument of ka-runner that makes it the supervisor: `ka-runner --supervise RUNNER`. */
#define KA_SANDBOX_SUPERVISE_ARG "--supervise"

/* Report of one supervised evaluation, parsed from the status line. */
typedef struct ka_sandbox_report {
  int valid;       /* 1 if the supervisor reported */
  int wstatus;     /* waitpid status of the runner */
  int leftovers;   /* processes left behind by the runner, all killed */
  int at_deadline; /* the supervisor was told to stop (SIGTERM) before the runner ended */
} ka_sandbox_report;

/* Parses a supervisor status line (text, NUL-terminated) into *r (inline: gpuexec
 * uses it without linking the rest of the sandbox). Returns 0 on
 * success, -1 if the text is not a complete report (r->valid stays 0). */
static inline int ka_sandbox_parse_report(const char *text, ka_sandbox_report *r) {
  memset(r, 0, sizeof *r);
  const char *p = text ? strstr(text, "runner ") : NULL;
  int st, left, dl;
  if (!p || sscanf(p, "runner %d leftovers %d deadline %d", &st, &left, &dl) != 3) return -1;
  r->valid = 1;
  r->wstatus = st;
  r->leftovers = left;
  r->at_deadline = dl;
  return 0;
}

/* Main of `ka-runner --supervise`: runs in the process gpuexec started (file
 * descriptors 0-3 and the tensor memfds as for a runner, KA_SANDBOX_STATUS_FD for the
 * report). Becomes a child subreaper, forks and execs `runner_path` (the runner, no
 * arguments) in its own process group, waits for it, then kills and reaps every
 * remaining descendant. SIGTERM makes it kill the runner at once (the deadline).
 * Returns the process exit code (0 if the report was written). */
int ka_sandbox_supervise(const char *runner_path);

/* Applies the sandbox to the calling ka-runner before the candidate is compiled.
 * workdir: the evaluation's private directory (read-write under Landlock).
 * external_compiler: 1 if the backend compiles by running programs and runs submitted
 * code in processes of its own (host: cc, then `ka-runner --host-module`): process
 * creation then stays allowed here, and each such process locks itself with
 * ka_sandbox_lock_inherited() before it loads submitted code. 0 (NVRTC in process, the
 * candidate's kernels launched from here) locks at once. Call once, from the runner's
 * main thread, after the backend is open (the CUDA driver initialised) and the baseline
 * is built; the seccomp filters apply to every thread (TSYNC), Landlock to the calling
 * thread and what it starts. Returns KA_OK, or KA_ESYS with the reason in err when a
 * layer the kernel offers could not be applied (submitted code must then not run). */
int ka_sandbox_enter(const char *workdir, int external_compiler, char *err, size_t errlen);

/* Sandboxes a host module process (baseline's and candidate's alike, whether or not the
 * runner that started it is sandboxed yet) before it loads submitted code: not dumpable;
 * a Landlock domain of its own (system folders read-only, read-write only workdir, its
 * own folder; no /dev/shm), or with KA_SANDBOX_LANDLOCK=0 a nested domain that only
 * keeps it from ptrace of the runner; all capabilities dropped; the first seccomp stage
 * unless inherited, then the lock (no process creation, no execve, signals only to
 * itself, no resource limits, priorities or scheduling of other processes, no System V
 * IPC). The KA_SANDBOX_* switches of its environment turn layers off as for the runner.
 * Returns KA_OK, or KA_ESYS with the reason in err (submitted code must then not run). */
int ka_sandbox_module(const char *workdir, char *err, size_t errlen);

/* ka_sandbox_module() with the current directory as workdir (a module process is started
 * in its folder); a failure ends the process (exit 125) after a line on stderr. */
void ka_sandbox_lock_inherited(void);

/* Sandboxes the process that is about to exec the C compiler (host backend), in the
 * child after fork: not dumpable, Landlock with read access only to the system folders
 * (compiler, headers, libraries; no /proc, /sys or /dev but /dev/null) and read-write
 * only workdir (its sources and outputs), capabilities dropped, no_new_privs, the first
 * seccomp stage unless inherited. So an `.incbin` or `#include` the checks missed finds
 * nothing outside the workspace and the system folders. KA_OK or KA_ESYS with err. */
int ka_sandbox_compiler(const char *workdir, char *err, size_t errlen);

/* Sandboxes the process that is about to exec a command task's command on a GPU, in the
 * child after fork (gpuexec/daemon/command.c): as ka_sandbox_compiler, but Landlock also
 * gives read access to /proc and /sys (the GPU driver, torch, triton read them), to the
 * folders of ro (NULL-terminated, absolute paths: the commands' PATH) and read-write
 * access to /dev/null, zero, full, random, urandom and the device nodes of nodes
 * (NULL-terminated: the job's device only, e.g. /dev/nvidiactl, /dev/nvidia-uvm,
 * /dev/nvidia3; a node that does not exist is skipped); no other device, no /dev/shm.
 * Sockets: AF_UNIX stream sockets only (CUDA's initialisation makes one), and no
 * connect() or sendto() to an address, so none reaches a socket outside the command.
 * In a PID namespace made by ka_sandbox_command_pidns (this process its PID 1), also
 * that namespace's own /proc, writable for the command's processes, and a private
 * /dev/shm (see there); KA_ESYS if those mounts fail.
 * nodes NULL (a host command): ka_sandbox_compiler, and an IPC namespace of its own
 * (System V IPC and POSIX message queues end with its last process), or where that is
 * not allowed those calls refused by seccomp. KA_OK or KA_ESYS with err.
 * Not thread safe (call it in a single-threaded child). */
int ka_sandbox_command(const char *workdir, const char *const *nodes, const char *const *ro,
                       char *err, size_t errlen);

/* Gives the next child of the calling process a PID namespace of its own
 * (unshare(CLONE_NEWPID): the child is its PID 1, and when it ends the kernel ends every
 * process left in it), for a GPU command: that child's ka_sandbox_command then mounts a
 * /proc of that namespace (only the command's own processes), every entry of it but the
 * processes' folders bound read-only (sysctl, sysrq-trigger, the drivers' files: nothing
 * machine-wide can be written), a private /dev/shm, and lets the command write its own
 * processes' files there. CUDA's initialisation writes its threads' names into
 * /proc/PID/task/TID/comm and fails (error 304, "OS call failed") where it cannot; see
 * docs/sandbox.md. Call it in the command's supervisor, just before the fork of the
 * command, never in gpuexec. KA_OK, or KA_ESYS (not root: without CAP_SYS_ADMIN nothing
 * changes, /proc stays read-only and CUDA cannot initialise in the command).
 * Not thread safe. */
int ka_sandbox_command_pidns(void);

/* Checks the assembly GCC generated for a module-mode submission (text, len bytes) for
 * assembler directives that read files (.incbin, .include) or assemble other directives
 * (.macro, .rept, .irp, .irpc, .altmacro, .purgem); case-insensitive, anywhere in the
 * text. Returns 0 if none; otherwise the number found, with a malloc'd *log (caller
 * frees) naming each directive and its line, never any file's content. Pure. */
int ka_asm_check(const char *text, size_t len, char **log);

/* The runner's step between building the baseline and building the candidate: checks
 * the includes of the candidate's editable sources (ka_include_check; the launch plan is
 * not C; language triton: Python, no includes, not checked), then applies the sandbox
 * (ka_sandbox_enter; module-mode tasks compile with an external compiler and run
 * submitted code in module processes, which lock themselves; triton tasks compile in a
 * process of their own, gpuexec/backends/triton.h, and the runner locks itself after
 * with ka_sandbox_lock_runner). For a module-mode task it also arms the import check
 * (ka_sandbox_module_imports) of the candidate's module; t must outlive the build.
 * Returns KA_OK;
 * KA_ECOMPILE with the refusals in *log (malloc'd, caller frees); or KA_ESYS with the
 * reason in err if the sandbox could not be applied. */
int ka_sandbox_candidate(const ka_task *t, const Kernelarena__V1__RunnerJob *job, char **log,
                         char *err, size_t errlen);

/* The lock stage of seccomp (layer 4: no new process, no execve, ...) for a runner that
 * ka_sandbox_candidate left able to start processes because its compiler is one (language
 * triton): called once the candidate is built, before any of it runs. KA_OK (also with
 * KA_SANDBOX_SECCOMP=0) or KA_ESYS with the reason in err. */
int ka_sandbox_lock_runner(char *err, size_t errlen);

/* The default import allow-list of module mode (docs/integrity.md, item 12): fnmatch
 * patterns of the dynamic symbols a C kernel's shared object may import (libm, memory
 * and string functions, POSIX threads, debug output to stdout/stderr, timing, abort and
 * the symbols the compiler and glibc's startup code add), NULL-terminated. Derived from
 * what the host baselines and the test candidates import (`nm -D --undefined-only`). */
extern const char *const ka_import_defaults[];

/* 1 if an imported symbol `name` is allowed for task t (t NULL: the default list):
 * it matches a pattern of ka_import_defaults or t->allowed_imports, and no pattern of
 * t->denied_imports. Pure; thread-safe. */
int ka_import_allowed(const ka_task *t, const char *name);

/* Reads the dynamic symbol table of the ELF shared object at so_path (libelf) and
 * checks every undefined symbol (every import, weak ones included) with
 * ka_import_allowed. Returns 0 if all are allowed; the number of refused imports (at
 * least 1; also when the file is no readable ELF object: fail closed) with a malloc'd
 * *log (caller frees) naming each refused symbol and the task. Thread-safe (libelf
 * keeps no global state after elf_version). */
int ka_import_check(const char *so_path, const ka_task *t, char **log);

/* The host backend's hook between building and loading the candidate's module: if
 * ka_sandbox_candidate armed the check for a module-mode task in this process, runs
 * ka_import_check(so_path, that task, log); otherwise (the baseline, a compile-only
 * check, an rtc task) returns 0 and leaves *log NULL. Not thread-safe with
 * ka_sandbox_candidate (one evaluation per runner process). */
int ka_sandbox_module_imports(const char *so_path, char **log);

/* The environment variable that lists the hidden folders (colon-separated absolute real
 * paths): the task registry's root, gpuexec's compile cache and its triton cache
 * (ka_sandbox_hide). */
#define KA_SANDBOX_HIDE_ENV "KA_SANDBOX_HIDE"

/* Adds path (resolved with realpath) to the folders hidden from every Landlock domain
 * that runs submitted code (compiler, module process, command task's command), by
 * appending it to KA_SANDBOX_HIDE in this process's environment, which gpuexec passes on
 * to its runners and they to their module processes. A hidden folder stays unreadable
 * even where it lies beneath a folder those domains may read (/usr, /opt, a venv of
 * --command-path, KA_TRITON_PREFIX, LD_LIBRARY_PATH): an installed layout keeps the
 * tasks' hidden files (instruction2triton's baseline/, reference.c, held-out cases) in
 * share/kernelarena/tasks. The runner's own domain (trusted code that reads the baseline)
 * is not affected. KA_OK; KA_ENOENT if path does not resolve; KA_ENOMEM. Call it before
 * threads start (setenv is not thread safe). */
int ka_sandbox_hide(const char *path);

/* 1 if the running kernel offers Landlock (its ABI version > 0), else 0. */
int ka_sandbox_landlock_abi(void);

/* Checks every #include (also #include_next, #import, #embed, and the digraph and
 * trigraph spellings of '#') of the submitted sources before they are compiled.
 * Allowed: <name> or "name" where name is in the allowlist of `language` ("c", "cuda",
 * "hip"), and "name" where name is one of names[0..n) (the task's other editable
 * files). Refused: absolute paths, "..", any other header, and `#include MACRO`.
 * Backslash-newline splices are undone first; comments between '#' and the operand are
 * skipped. Conservative: an include-like text inside a comment or string literal is
 * checked too. texts[i] has lens[i] bytes (need not be NUL-terminated).
 * Returns 0 if every include is allowed; otherwise the number of refused includes, with
 * a malloc'd log in *log (caller frees) naming file, line and the refused operand
 * spelling as written (never the content of any file). */
int ka_include_check(const char *language, const char *const *names, const char *const *texts,
                     const size_t *lens, int n, char **log);

#endif
