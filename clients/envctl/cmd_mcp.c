/* `envctl mcp`: a Model Context Protocol server over stdio for one episode's workspace.
 *
 * Transport and messages follow the MCP specification (revision 2025-06-18,
 * https://modelcontextprotocol.io/specification/2025-06-18/basic/transports#stdio):
 * newline-delimited JSON-RPC 2.0 messages on stdin/stdout, nothing else on stdout.
 * Methods: initialize, ping, tools/list, tools/call; notifications are accepted and
 * need no reply. Tools:
 *   evaluate     submit the workspace's editable files as one step (like `envctl step`)
 *   last_result  the result of the workspace's last step (.kernelarena/last_result.json)
 * The target episode is resolved like `envctl step` (env, then the state file). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "ka_common.h"

#define EC_MCP_PROTOCOL "2025-06-18"

/* Protocol revisions this server speaks; a client asking for another gets ours. */
static const char *const ec_mcp_versions[] = {"2025-06-18", "2025-03-26", "2024-11-05"};

static void ec_mcp_send(json_t *msg) {
  char *s = json_dumps(msg, JSON_COMPACT);
  if (s) {
    fputs(s, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    free(s);
  }
  json_decref(msg);
}

static void ec_mcp_error(json_t *id, int code, const char *message) {
  ec_mcp_send(json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                        "error", "code", code, "message", message));
}

static void ec_mcp_result(json_t *id, json_t *result) {
  ec_mcp_send(json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result));
}

static json_t *ec_mcp_tools(void) {
  return json_pack(
      "{s:[{s:s, s:s, s:s, s:{s:s, s:{}}, s:{s:b, s:b}}, {s:s, s:s, s:s, s:{s:s, s:{}}, "
      "s:{s:b}}]}",
      "tools", "name", "evaluate", "title", "Evaluate the kernel", "description",
      "Submit the current contents of the editable files in the workspace as one step of "
      "the episode: they are compiled, checked against the reference on fresh inputs and "
      "timed against the baseline. Returns status, correctness per case, speedup and "
      "reward. Each call is a recorded step and counts against the step limit.",
      "inputSchema", "type", "object", "properties", "annotations", "readOnlyHint", 0,
      "idempotentHint", 0, "name", "last_result", "title", "Last step result", "description",
      "The result of the workspace's last step (status, cases, speedup, reward), without "
      "submitting anything.",
      "inputSchema", "type", "object", "properties", "annotations", "readOnlyHint", 1);
}

/* A tools/call result: one text block plus the JSON as structuredContent. */
static json_t *ec_mcp_tool_result(const char *text, json_t *structured, int is_error) {
  json_t *r = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", text, "isError",
                        is_error);
  if (structured) json_object_set_new(r, "structuredContent", structured);
  return r;
}

static json_t *ec_mcp_call(const char *ws, const char *name) {
  char err[1024];
  ec_step_target t;
  if (ec_step_target_load(ws, NULL, NULL, &t, err, sizeof err))
    return ec_mcp_tool_result(err, NULL, 1);
  json_t *out;
  if (!strcmp(name, "evaluate")) {
    json_t *r;
    if (ec_step_submit(&t, &r, err, sizeof err)) {
      out = ec_mcp_tool_result(err, NULL, 1);
    } else {
      char *s = ec_step_summary(r);
      out = ec_mcp_tool_result(s, r, 0);
      free(s);
    }
  } else {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/.kernelarena/last_result.json", t.workspace);
    json_error_t je;
    json_t *r = json_load_file(path, 0, &je);
    if (!r) {
      out = ec_mcp_tool_result("no step has been taken in this workspace yet", NULL, 0);
    } else {
      char *s = ec_step_summary(r);
      out = ec_mcp_tool_result(s, r, 0);
      free(s);
    }
  }
  ec_step_target_free(&t);
  return out;
}

static void ec_mcp_handle(const char *ws, json_t *msg) {
  json_t *id = json_object_get(msg, "id");
  const char *method = json_string_value(json_object_get(msg, "method"));
  if (!json_is_object(msg) || !method) {
    if (id) ec_mcp_error(id, -32600, "invalid request");
    return; /* a response or garbage without id: nothing to answer */
  }
  if (!id) return; /* notifications (initialized, cancelled, ...) */
  json_t *params = json_object_get(msg, "params");
  if (!strcmp(method, "initialize")) {
    const char *want = json_string_value(json_object_get(params, "protocolVersion"));
    const char *ver = EC_MCP_PROTOCOL;
    for (size_t i = 0; want && i < sizeof ec_mcp_versions / sizeof *ec_mcp_versions; i++)
      if (!strcmp(want, ec_mcp_versions[i])) ver = ec_mcp_versions[i];
    ec_mcp_result(id, json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s}, s:s}", "protocolVersion", ver,
                                "capabilities", "tools", "listChanged", 0, "serverInfo", "name",
                                "kernelarena", "version", KA_VERSION, "instructions",
                                "Edit the kernel files in the workspace, then call evaluate to "
                                "score them; last_result shows the latest score."));
  } else if (!strcmp(method, "ping")) {
    ec_mcp_result(id, json_object());
  } else if (!strcmp(method, "tools/list")) {
    ec_mcp_result(id, ec_mcp_tools());
  } else if (!strcmp(method, "tools/call")) {
    const char *name = json_string_value(json_object_get(params, "name"));
    if (!name || (strcmp(name, "evaluate") && strcmp(name, "last_result"))) {
      ec_mcp_error(id, -32602, "unknown tool (evaluate, last_result)");
      return;
    }
    ec_mcp_result(id, ec_mcp_call(ws, name));
  } else {
    ec_mcp_error(id, -32601, "method not found");
  }
}

int cmd_mcp(int argc, char **argv) {
  static const struct option opts[] = {
      {"workspace", required_argument, 0, 'w'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  const char *ws = NULL;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    if (c == 'w')
      ws = optarg;
    else if (c == 'h') {
      printf(
          "usage: envctl mcp [--workspace DIR]\n"
          "An MCP server on stdin/stdout with the tools evaluate and last_result for the\n"
          "episode of the workspace (resolved like `envctl step`).\n");
      return 0;
    } else
      return 2;
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  while ((n = getline(&line, &cap, stdin)) >= 0) {
    if (n == 0 || strspn(line, " \t\r\n") == (size_t)n) continue;
    json_error_t je;
    json_t *msg = json_loadb(line, (size_t)n, 0, &je);
    if (!msg) {
      ec_mcp_error(NULL, -32700, "parse error");
      continue;
    }
    if (json_is_array(msg)) { /* JSON-RPC batch (2025-03-26) */
      size_t i;
      json_t *m;
      json_array_foreach(msg, i, m) ec_mcp_handle(ws, m);
    } else {
      ec_mcp_handle(ws, msg);
    }
    json_decref(msg);
  }
  free(line);
  return 0;
}
