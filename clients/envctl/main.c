/* envctl: the kernelarena command line.
 *
 *   envctl COMMAND [options]      (envctl --help lists the commands)
 *
 * main() looks COMMAND up in ec_commands[] and calls its cmd_NAME(argc, argv), one
 * cmd_NAME.c per command, with argv[0] the command's name (git's builtin table is the
 * model). Commands that talk to a server start an envserver and a gpuexec of their own
 * when --server is not given (embedded.c). */
#include <stdio.h>
#include <string.h>

#include "envctl.h"

/* One sub-command: its name, the synopsis and summary of `envctl --help`, and the
 * name getopt reports errors under (NULL: the command's name). */
typedef struct ec_command {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *synopsis;
  const char *summary;
  const char *prog;
} ec_command;

static const ec_command ec_commands[] = {
    {"tasks", cmd_tasks, "tasks [--prompts]",
     "list the tasks; --prompts [--seed S] [--seeds K] [--all-tasks]: the prompts dataset (JSONL)",
     "envctl"},
    {"episode", cmd_episode, "episode --task ID", "run one episode and print every step", "envctl"},
    {"health", cmd_health, "health", "ask a running server how it is", "envctl"},
    {"export", cmd_export, "export", "episodes as JSONL: --server URL --run R | --episode E",
     "envctl"},
    {"replay", cmd_replay, "replay EPISODE",
     "re-evaluate a recorded episode's steps (--server URL)", "envctl"},
    {"validate", cmd_validate, "validate [TASK...]",
     "check task definitions (envctl validate --help)", NULL},
    {"agent", cmd_agent, "agent --task ID", "one episode with a coding-agent adapter (--help)",
     NULL},
    {"step", cmd_step, "step", "inside an agent's workspace: evaluate its files (--help)", NULL},
    {"mcp", cmd_mcp, "mcp", "MCP server (stdio) with the tools evaluate, last_result", NULL},
    {"run", cmd_run, "run --config FILE", "agent episodes of a run config (--resume RUN; --help)",
     NULL},
    {"compare", cmd_compare, "compare RUN_A RUN_B",
     "paired comparison of two runs, with a verdict (--help)", NULL},
    {"report", cmd_report, "report RUN... -o F", "self-contained HTML report of runs (--help)",
     NULL},
};
#define EC_NCOMMANDS (sizeof ec_commands / sizeof *ec_commands)

void ec_usage(FILE *f) {
  fprintf(f, "usage: envctl COMMAND [options]\ncommands:\n");
  for (size_t i = 0; i < EC_NCOMMANDS; i++)
    fprintf(f, "  %-21s %s\n", ec_commands[i].synopsis, ec_commands[i].summary);
  fprintf(f,
          "options:\n"
          "  --server URL          a running envserver (default: start one for this command)\n"
          "  --tasks DIR           task folder (default ./tasks, else the source tree's)\n"
          "  --backends LIST       backends of the embedded executor (default auto)\n"
          "  --agent AGENT         baseline (default) | files:DIR | command:CMD\n"
          "  --max-steps N         steps in the episode (default 1)\n"
          "  --seed S              episode seed (default: drawn by the server)\n"
          "  --workspace DIR       where command agents edit files (default: a new, kept\n"
          "                        $TMPDIR/kernelarena-ws-XXXXXX)\n"
          "  --timeout S           per-request timeout in seconds (default 900)\n"
          "  --agent-timeout S     per-run limit of a command agent (default 600)\n"
          "  --verbose             show server and executor logs, and each step's whole\n"
          "                        runtime log (the runner's timings per case and phase)\n");
}

/* The command called name, or NULL. */
static const ec_command *ec_command_find(const char *name) {
  for (size_t i = 0; i < EC_NCOMMANDS; i++)
    if (!strcmp(name, ec_commands[i].name)) return &ec_commands[i];
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    ec_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const ec_command *cmd = ec_command_find(argv[1]);
  if (!cmd) {
    fprintf(stderr, "envctl: unknown command '%s'\n", argv[1]);
    ec_usage(stderr);
    return 2;
  }
  if (cmd->prog) argv[1] = (char *)cmd->prog;
  int rc = cmd->fn(argc - 1, argv + 1);
  if (rc == EC_EXIT_HELP || rc == EC_EXIT_USAGE) {
    ec_usage(rc == EC_EXIT_HELP ? stdout : stderr);
    return rc == EC_EXIT_HELP ? 0 : 2;
  }
  return rc;
}
