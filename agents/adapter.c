/* The table of adapters (agents.h), the checks every agent config gets, and the
 * helpers adapters share: settings of a config and argument vectors. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents.h"
#include "ka_common.h"

/* Every adapter; the only place their names are compared. */
static const ka_adapter_ops *const adapter_table[] = {&ka_adapter_claude_code, &ka_adapter_codex,
                                                      &ka_adapter_cursor, &ka_adapter_command,
                                                      &ka_adapter_replay};
#define ADAPTER_COUNT (sizeof adapter_table / sizeof *adapter_table)

const ka_adapter_ops *ka_adapter_find(const char *name) {
  for (size_t i = 0; name && i < ADAPTER_COUNT; i++)
    if (!strcmp(name, adapter_table[i]->name)) return adapter_table[i];
  return NULL;
}

static char adapter_names_buf[256];
static pthread_once_t adapter_names_once = PTHREAD_ONCE_INIT;

static void adapter_names_init(void) {
  size_t len = 0;
  for (size_t i = 0; i < ADAPTER_COUNT; i++)
    len += (size_t)snprintf(adapter_names_buf + len, sizeof adapter_names_buf - len, "%s%s",
                            i ? ", " : "", adapter_table[i]->name);
}

const char *ka_adapter_names(void) {
  pthread_once(&adapter_names_once, adapter_names_init);
  return adapter_names_buf;
}

const char *ka_cfg_str(const json_t *cfg, const char *key, const char *dflt) {
  const char *s = json_string_value(json_object_get(cfg, key));
  return s && *s ? s : dflt;
}

int ka_cfg_int(const json_t *cfg, const char *key, int dflt) {
  json_t *v = json_object_get(cfg, key);
  if (json_is_integer(v)) return (int)json_integer_value(v);
  if (json_is_string(v)) return atoi(json_string_value(v));
  return dflt;
}

int ka_cfg_bool(const json_t *cfg, const char *key, int dflt) {
  json_t *v = json_object_get(cfg, key);
  if (json_is_boolean(v)) return json_is_true(v);
  if (json_is_string(v)) return !strcmp(json_string_value(v), "true");
  return dflt;
}

void ka_argv_add(ka_argv *a, const char *s) {
  if (a->n < 94) a->v[a->n++] = strdup(s);
  a->v[a->n] = NULL;
}

void ka_argv_free(ka_argv *a) {
  for (int i = 0; i < a->n; i++) free(a->v[i]);
  a->n = 0;
  a->v[0] = NULL;
}

/* 1 if prog can be executed: a path with '/' as it is, else a name on dir (the agent's
 * first PATH entry: envctl's folder) or on $PATH, as execvp would find it. */
static int adapter_cli_found(const char *prog, const char *dir) {
  if (strchr(prog, '/')) return access(prog, X_OK) == 0;
  const char *path = getenv("PATH");
  ka_sb all = {0};
  ka_sb_printf(&all, "%s:%s", dir, path ? path : "/usr/bin:/bin");
  int found = 0;
  for (char *save = NULL, *d = strtok_r(all.s, ":", &save); d && !found;
       d = strtok_r(NULL, ":", &save)) {
    char p[PATH_MAX * 2];
    snprintf(p, sizeof p, "%s/%s", *d ? d : ".", prog);
    struct stat st;
    found = stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
  }
  ka_sb_free(&all);
  return found;
}

/* The agent settings docs/agents.md lists; any other key is a typo, refused. */
static const char *const adapter_keys[] = {
    "adapter",   "model",     "effort", "permission_mode", "sandbox",     "force",
    "mcp",       "bin",       "args",   "command",         "replay",      "replay_episode",
    "timeout_s", "max_steps", "reward", "final_eval",      "stream_json", NULL};

/* The checks of settings every adapter shares. */
static int adapter_check_common(const json_t *cfg, char *err, size_t errlen) {
  const char *key;
  json_t *val;
  json_object_foreach((json_t *)cfg, key, val) {
    int known = 0;
    for (int i = 0; adapter_keys[i] && !known; i++) known = !strcmp(key, adapter_keys[i]);
    if (!known)
      return ka_seterr(err, errlen, KA_EINVAL,
                       "unknown agent setting '%s' (adapter, model, effort, permission_mode, "
                       "sandbox, force, mcp, bin, args, command, replay, replay_episode, "
                       "timeout_s, max_steps, reward, final_eval, stream_json; docs/agents.md)",
                       key);
  }
  /* whole positive numbers: "abc" or 0 must not become an agent killed at once */
  static const char *const ints[] = {"timeout_s", "max_steps"};
  for (int i = 0; i < 2; i++) {
    json_t *v = json_object_get(cfg, ints[i]);
    if (!v) continue;
    long long n = 0;
    char *end = NULL;
    if (json_is_integer(v))
      n = json_integer_value(v);
    else if (json_is_string(v))
      n = strtoll(json_string_value(v), &end, 10);
    if (!(json_is_integer(v) || (json_is_string(v) && end && !*end && *json_string_value(v))) ||
        n <= 0 || n > 1000000)
      return ka_seterr(err, errlen, KA_EINVAL,
                       "agent setting %s must be a whole number from 1 to 1000000", ints[i]);
  }
  json_t *cv = json_object_get(cfg, "command");
  if (cv && !json_is_string(cv))
    return ka_seterr(err, errlen, KA_EINVAL,
                     "agent setting command must be a shell command (text); quote it in YAML, "
                     "e.g. command: \"true\"");
  return KA_OK;
}

int ka_adapter_check(const json_t *cfg, char *err, size_t errlen) {
  int rc = adapter_check_common(cfg, err, errlen);
  if (rc) return rc;
  const char *name = ka_cfg_str(cfg, "adapter", "command");
  const ka_adapter_ops *ad = ka_adapter_find(name);
  if (!ad)
    return ka_seterr(err, errlen, KA_EINVAL, "unknown adapter '%s' (%s)", name, ka_adapter_names());
  if (ad->check && (rc = ad->check(cfg, err, errlen))) return rc;
  if (!ad->default_bin) return KA_OK;
  const char *bin = ka_cfg_str(cfg, "bin", ad->default_bin);
  char exe[PATH_MAX] = ".";
  ka_exe_dir(exe, sizeof exe);
  if (!adapter_cli_found(bin, exe))
    return ka_seterr(err, errlen, KA_ENOENT,
                     "adapter %s: the agent CLI '%s' was not found on PATH (install it, or "
                     "name it with bin: PATH)",
                     name, bin);
  return KA_OK;
}
