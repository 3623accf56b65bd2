/* `envctl mcp`: a Model Context Protocol server over stdio for one episode's workspace.
 *
 * Transport and messages follow the MCP specification (revision 2025-06-18,
 * https://modelcontextprotocol.io/specification/2025-06-18/basic/transports#stdio):
 * newline-delimited JSON-RPC 2.0 messages on stdin/stdout, nothing else on stdout.
 * Methods: initialize, ping, tools/list, tools/call; notifications are accepted and
 * need no reply. Tools:
 *   evaluate     submit the workspace's editable files as one step (like `envctl step`);
 *                its optional argument files {name: contents} is written first
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

/* The tools (JSON Schema 2020-12 schemas, as MCP 2025-06-18 asks). evaluate's output
 * schema is the step result of `envctl step --json` (clients/envctl/step.c,
 * ec_step_json): numbers that are not finite are null. */
static const char ec_mcp_tools_json[] =
    "{\"tools\": ["
    "{\"name\": \"evaluate\", \"title\": \"Evaluate the kernel\","
    " \"description\": \"Submit the editable files as one step of the episode: they are "
    "compiled, checked against the reference on fresh inputs and timed against the baseline. "
    "Returns status, correctness per case, speedup and reward. With files, those files are "
    "written into the workspace first (the others stay as they are); without, the workspace "
    "is submitted as it is. Each call is a recorded step and counts against the step "
    "limit.\","
    " \"inputSchema\": {\"type\": \"object\", \"properties\": {\"files\": {\"type\": "
    "\"object\", \"description\": \"editable file name -> its full new contents\","
    " \"additionalProperties\": {\"type\": \"string\"}}}, \"additionalProperties\": false},"
    " \"outputSchema\": {\"type\": \"object\", \"required\": [\"step\", \"status\", "
    "\"reward\", \"cases\"], \"properties\": {"
    "\"step\": {\"type\": \"integer\"}, \"reward\": {\"type\": [\"number\", \"null\"]},"
    " \"status\": {\"type\": \"string\", \"description\": \"OK, COMPILE_ERROR, INCORRECT, "
    "TIMEOUT, ...\"}, \"compiled\": {\"type\": \"boolean\"}, \"correct\": {\"type\": "
    "\"boolean\"}, \"speedup_geomean\": {\"type\": [\"number\", \"null\"]}, "
    "\"terminated\": {\"type\": \"boolean\"}, \"truncated\": {\"type\": \"boolean\"}, "
    "\"message\": {\"type\": \"string\"}, \"compile_log\": {\"type\": \"string\"}, "
    "\"runtime_log\": {\"type\": \"string\"}, \"cases\": {\"type\": \"array\", \"items\": "
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, "
    "\"correct\": {\"type\": \"boolean\"}, \"speedup\": {\"type\": [\"number\", "
    "\"null\"]}, \"baseline_ms\": {\"type\": [\"number\", \"null\"]}, \"candidate_ms\": "
    "{\"type\": [\"number\", \"null\"]}, \"message\": {\"type\": \"string\"}}}}, "
    "\"components\": {\"type\": \"object\"}, \"info\": {\"type\": \"object\"}}},"
    " \"annotations\": {\"readOnlyHint\": false, \"idempotentHint\": false}},"
    "{\"name\": \"last_result\", \"title\": \"Last step result\","
    " \"description\": \"The result of the workspace's last step (status, cases, speedup, "
    "reward), without submitting anything.\","
    " \"inputSchema\": {\"type\": \"object\", \"properties\": {}},"
    " \"annotations\": {\"readOnlyHint\": true}}]}";

static json_t *ec_mcp_tools(void) {
  json_error_t je;
  json_t *t = json_loads(ec_mcp_tools_json, 0, &je);
  if (!t) fprintf(stderr, "envctl mcp: tool list: %s (column %d)\n", je.text, je.column);
  return t ? t : json_pack("{s:[]}", "tools");
}

/* Writes evaluate's `files` argument ({name: contents}) into the workspace: every name
 * must be one of the target's editable files and every value a string, checked before
 * anything is written. KA_OK, or KA_EINVAL with the reason in err (nothing written). */
static int ec_mcp_write_files(const ec_step_target *t, const json_t *files, char *err,
                              size_t errlen) {
  if (!files) return KA_OK;
  if (!json_is_object(files))
    return ka_seterr(err, errlen, KA_EINVAL, "files must be an object {file name: contents}");
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)files, k, v) {
    int editable = 0;
    for (int i = 0; i < t->nfiles; i++) editable |= !strcmp(t->files[i], k);
    if (!editable) {
      ka_sb names = {0};
      for (int i = 0; i < t->nfiles; i++) ka_sb_printf(&names, "%s%s", i ? ", " : "", t->files[i]);
      ka_seterr(err, errlen, KA_EINVAL, "%s is not an editable file of this task (editable: %s)", k,
                names.s ? names.s : "none");
      ka_sb_free(&names);
      return KA_EINVAL;
    }
    if (!json_is_string(v))
      return ka_seterr(err, errlen, KA_EINVAL, "the contents of %s must be a string", k);
  }
  json_object_foreach((json_t *)files, k, v) {
    char path[PATH_MAX * 2];
    snprintf(path, sizeof path, "%s/%s", t->workspace, k);
    int rc = ka_write_file(path, json_string_value(v), json_string_length(v));
    if (rc) return ka_seterr(err, errlen, rc, "cannot write %s: %s", path, ka_strerror(rc));
  }
  return KA_OK;
}

/* A tools/call result: one text block plus the JSON as structuredContent. */
static json_t *ec_mcp_tool_result(const char *text, json_t *structured, int is_error) {
  json_t *r = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", text, "isError",
                        is_error);
  if (structured) json_object_set_new(r, "structuredContent", structured);
  return r;
}

static json_t *ec_mcp_call(const char *ws, const char *name, const json_t *args) {
  char err[1024];
  ec_step_target t;
  if (ec_step_target_load(ws, NULL, NULL, &t, err, sizeof err))
    return ec_mcp_tool_result(err, NULL, 1);
  json_t *out;
  if (!strcmp(name, "evaluate")) {
    json_t *r;
    if (ec_mcp_write_files(&t, json_object_get(args, "files"), err, sizeof err) ||
        ec_step_submit(&t, &r, err, sizeof err)) {
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
    ec_mcp_result(id, ec_mcp_call(ws, name, json_object_get(params, "arguments")));
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
