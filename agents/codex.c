/* The codex adapter: `codex exec --json` in the workspace; the prompt on stdin (`-`)
 * (docs/agents.md). */
#include <stdio.h>

#include "agents.h"
#include "ka_common.h"

static int codex_argv(const json_t *cfg, const ka_agent_ctx *ctx, ka_argv *a, char *err,
                      size_t errlen) {
  const char *model = ka_cfg_str(cfg, "model", NULL), *effort = ka_cfg_str(cfg, "effort", NULL);
  ka_argv_add(a, ka_cfg_str(cfg, "bin", "codex"));
  ka_argv_add(a, "exec");
  ka_argv_add(a, "--json");
  ka_argv_add(a, "--cd");
  ka_argv_add(a, ctx->workspace);
  ka_argv_add(a, "--skip-git-repo-check");
  ka_argv_add(a, "--sandbox");
  ka_argv_add(a, ka_cfg_str(cfg, "sandbox", "workspace-write"));
  if (model) ka_argv_add(a, "--model"), ka_argv_add(a, model);
  if (effort) {
    char b[128];
    snprintf(b, sizeof b, "model_reasoning_effort=\"%s\"", effort);
    ka_argv_add(a, "-c"), ka_argv_add(a, b);
  }
  size_t i;
  json_t *v;
  json_array_foreach(json_object_get(cfg, "args"), i, v) if (json_is_string(v))
      ka_argv_add(a, json_string_value(v));
  ka_argv_add(a, "-");
  return KA_OK;
}

const ka_adapter_ops ka_adapter_codex = {
    .name = "codex", .default_bin = "codex", .argv = codex_argv, .final_eval = 1};
