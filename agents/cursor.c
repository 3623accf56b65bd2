/* The cursor adapter: cursor-agent in print mode with stream-json output; the prompt is
 * the last argument (recorded as "<prompt>") (docs/agents.md). */
#include "agents.h"
#include "ka_common.h"

static int cursor_argv(const json_t *cfg, const ka_agent_ctx *ctx, ka_argv *a, char *err,
                       size_t errlen) {
  const char *model = ka_cfg_str(cfg, "model", NULL);
  ka_argv_add(a, ka_cfg_str(cfg, "bin", "cursor-agent"));
  ka_argv_add(a, "--print");
  ka_argv_add(a, "--output-format");
  ka_argv_add(a, "stream-json");
  if (ka_cfg_bool(cfg, "force", 1)) ka_argv_add(a, "--force");
  if (model) ka_argv_add(a, "--model"), ka_argv_add(a, model);
  size_t i;
  json_t *v;
  json_array_foreach(json_object_get(cfg, "args"), i, v) if (json_is_string(v))
      ka_argv_add(a, json_string_value(v));
  ka_argv_add(a, ctx->prompt);
  return KA_OK;
}

const ka_adapter_ops ka_adapter_cursor = {.name = "cursor",
                                          .default_bin = "cursor-agent",
                                          .argv = cursor_argv,
                                          .prompt_last_arg = 1,
                                          .final_eval = 1};
