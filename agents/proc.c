/* The process runner of agents (agents.h): every agent, of `envctl agent`, `envctl run`
 * and `envctl episode --agent command:CMD`, starts here. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agents.h"
#include "ka_common.h"

extern char **environ;

/* The agent's environment: this process's, less KA_ADMIN_TOKEN and the keys env
 * replaces, then env. The strings are borrowed; the array is malloc'd (NULL: out of
 * memory). */
static char **proc_envp(char *const *env) {
  size_t ne = 0, na = 0;
  while (environ[ne]) ne++;
  while (env && env[na]) na++;
  char **envp = calloc(ne + na + 1, sizeof *envp);
  if (!envp) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < ne; i++) {
    if (!strncmp(environ[i], "KA_ADMIN_TOKEN=", 15)) continue; /* never the agent's */
    int replaced = 0;
    for (size_t j = 0; j < na && !replaced; j++) {
      size_t kl = strcspn(env[j], "=");
      replaced = !strncmp(environ[i], env[j], kl + 1);
    }
    if (!replaced) envp[k++] = environ[i];
  }
  for (size_t j = 0; j < na; j++) envp[k++] = env[j];
  envp[k] = NULL;
  return envp;
}

/* Opens path on fd (flags for open); NULL path: leaves fd as it is. 0 or -1. */
static int proc_redirect(int fd, const char *path, int flags) {
  if (!path) return 0;
  int f = open(path, flags, 0644);
  if (f < 0) return -1;
  if (f != fd) {
    dup2(f, fd);
    close(f);
  }
  return 0;
}

/* The child: async-signal-safe calls only (the parent may have threads). */
static void proc_child(const ka_agent_proc *p, char **envp) {
  setpgid(0, 0);
  struct sigaction dfl = {.sa_handler = SIG_DFL};
  sigaction(SIGINT, &dfl, NULL);
  sigaction(SIGTERM, &dfl, NULL);
  sigaction(SIGPIPE, &dfl, NULL);
  if (chdir(p->cwd) != 0) _exit(126);
  if (proc_redirect(0, p->stdin_path ? p->stdin_path : "/dev/null", O_RDONLY) ||
      proc_redirect(1, p->stdout_path, O_WRONLY | O_CREAT | O_TRUNC) ||
      proc_redirect(2, p->stderr_path, O_WRONLY | O_CREAT | O_TRUNC))
    _exit(126);
  execvpe(p->argv[0], p->argv, envp);
  static const char msg[] =
      "envctl agent: cannot run the agent CLI (not found or not executable)\n";
  ssize_t w = write(2, msg, sizeof msg - 1);
  (void)w;
  _exit(127);
}

/* Waits for pid: at the time limit or on interruption SIGTERM to the group, SIGKILL
 * grace_s later. Returns the wait status; sets *stopped when the agent was stopped. */
static int proc_wait(const ka_agent_proc *p, pid_t pid, double t0, ka_agent_proc_result *res,
                     int *stopped) {
  double deadline = t0 + p->timeout_s, term_at = 0;
  int st = 0;
  for (;;) {
    if (waitpid(pid, &st, WNOHANG) == pid) break;
    double now = ka_now_s();
    int intr = p->interrupted && *p->interrupted;
    if (!term_at && (now > deadline || intr)) {
      res->timed_out = now > deadline;
      res->interrupted = intr;
      kill(-pid, SIGTERM);
      term_at = now;
    } else if (term_at && now >= term_at + p->grace_s) {
      kill(-pid, SIGKILL);
      waitpid(pid, &st, 0);
      break;
    }
    usleep(20000);
  }
  *stopped = term_at > 0;
  return st;
}

int ka_agent_run(const ka_agent_proc *p, ka_agent_proc_result *res) {
  memset(res, 0, sizeof *res);
  char **envp = proc_envp(p->env);
  if (!envp) return KA_ENOMEM;
  double t0 = ka_now_s();
  pid_t pid = fork();
  if (pid < 0) {
    free(envp);
    return KA_ESYS;
  }
  if (pid == 0) proc_child(p, envp);
  setpgid(pid, pid);
  free(envp);
  int stopped;
  int st = proc_wait(p, pid, t0, res, &stopped);
  kill(-pid, SIGKILL); /* whatever the agent left running in its group */
  res->wall_s = ka_now_s() - t0;
  res->exit_code = !stopped && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return KA_OK;
}
