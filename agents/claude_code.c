/* The claude_code adapter: Claude Code in print mode with stream-json output
 * (docs/agents.md). The prompt goes on stdin: --mcp-config takes several values and
 * would swallow a trailing prompt. */
#include "agents.h"
#include "ka_common.h"

static int claude_argv(const json_t *cfg, const ka_agent_ctx *ctx, ka_argv *a, char *err,
                       size_t errlen) {
  const char *model = ka_cfg_str(cfg, "model", NULL), *effort = ka_cfg_str(cfg, "effort", NULL);
  ka_argv_add(a, ka_cfg_str(cfg, "bin", "claude"));
  ka_argv_add(a, "--print");
  ka_argv_add(a, "--output-format");
  ka_argv_add(a, "stream-json");
  ka_argv_add(a, "--verbose"); /* required by --print with stream-json */
  ka_argv_add(a, "--permission-mode");
  ka_argv_add(a, ka_cfg_str(cfg, "permission_mode", "bypassPermissions"));
  if (model) ka_argv_add(a, "--model"), ka_argv_add(a, model);
  if (effort) ka_argv_add(a, "--effort"), ka_argv_add(a, effort);
  if (ctx->mcp_config) ka_argv_add(a, "--mcp-config"), ka_argv_add(a, ctx->mcp_config);
  size_t i;
  json_t *v;
  json_array_foreach(json_object_get(cfg, "args"), i, v) if (json_is_string(v))
      ka_argv_add(a, json_string_value(v));
  return KA_OK;
}

const ka_adapter_ops ka_adapter_claude_code = {
    .name = "claude_code", .default_bin = "claude", .argv = claude_argv, .final_eval = 1};
