/* The command adapter: any shell command (`/bin/sh -c CMD`) as the agent; its output is
 * a plain-text transcript unless stream_json is set (docs/agents.md). */
#include "agents.h"
#include "ka_common.h"

static int command_check(const json_t *cfg, char *err, size_t errlen) {
  const char *cmd = ka_cfg_str(cfg, "command", NULL);
  if (!cmd || !*cmd) return ka_seterr(err, errlen, KA_EINVAL, "adapter command needs command: CMD");
  return KA_OK;
}

static int command_argv(const json_t *cfg, const ka_agent_ctx *ctx, ka_argv *a, char *err,
                        size_t errlen) {
  const char *cmd = ka_cfg_str(cfg, "command", NULL);
  if (!cmd) return ka_seterr(err, errlen, KA_EINVAL, "adapter command needs command: CMD");
  ka_argv_add(a, "/bin/sh");
  ka_argv_add(a, "-c");
  ka_argv_add(a, cmd);
  return KA_OK;
}

static const char *command_transcript(const json_t *cfg) {
  return ka_cfg_bool(cfg, "stream_json", 0) ? "transcript.jsonl" : "transcript.txt";
}

const ka_adapter_ops ka_adapter_command = {.name = "command",
                                           .check = command_check,
                                           .argv = command_argv,
                                           .transcript = command_transcript,
                                           .final_eval = 1};
