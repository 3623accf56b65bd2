/* Command tasks: config.yaml folders in the seed system's format (task_command.h). */
#include "task_command.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <yaml.h>

#include "ka_common.h"

#define TC_MAX_FILE (64 << 20) /* largest harness file hashed */
#define TC_MAX_DEPTH 6

/* ---- yaml helpers */

static yaml_node_t *tc_get(yaml_document_t *doc, yaml_node_t *map, const char *key) {
  if (!map || map->type != YAML_MAPPING_NODE) return NULL;
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(doc, p->key);
    if (k && k->type == YAML_SCALAR_NODE && !strcmp((const char *)k->data.scalar.value, key))
      return yaml_document_get_node(doc, p->value);
  }
  return NULL;
}

static const char *tc_scalar(yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* A scalar or a list of scalars into out[0..max); returns the count or -1 (bad shape). */
static int tc_strs(yaml_document_t *doc, yaml_node_t *n, char **out, int max) {
  if (!n) return 0;
  if (n->type == YAML_SCALAR_NODE) {
    if (!*tc_scalar(n)) return 0;
    return (out[0] = strdup(tc_scalar(n))) ? 1 : -1;
  }
  if (n->type != YAML_SEQUENCE_NODE) return -1;
  int k = 0;
  for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
    const char *s = tc_scalar(yaml_document_get_node(doc, *it));
    if (!s || k == max) return -1;
    if (!(out[k++] = strdup(s))) return -1;
  }
  return k;
}

/* ---- files of the folder */

typedef struct tc_list {
  char **v;
  int n;
} tc_list;

static int tc_cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file under root/rel (relative paths; symlinks and hidden build output
 * folders __pycache__ skipped), recursively. */
static int tc_walk(const char *root, const char *rel, int depth, tc_list *l) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s%s%s", root, *rel ? "/" : "", rel);
  DIR *d = opendir(path);
  if (!d) return KA_EIO;
  int rc = KA_OK;
  struct dirent *e;
  while (rc == KA_OK && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, "__pycache__"))
      continue;
    char sub[PATH_MAX], full[PATH_MAX];
    snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
    snprintf(full, sizeof full, "%s/%s", root, sub);
    struct stat st;
    if (lstat(full, &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (depth < 16) rc = tc_walk(root, sub, depth + 1, l);
    } else if (S_ISREG(st.st_mode) && !ka_command_is_output(sub)) {
      char **nv = realloc(l->v, sizeof *nv * (size_t)(l->n + 1));
      if (!nv || !(nv[l->n] = strdup(sub))) {
        if (nv) l->v = nv;
        rc = KA_ENOMEM;
      } else {
        l->v = nv, l->n++;
      }
    }
  }
  closedir(d);
  return rc;
}

static void tc_list_free(tc_list *l) {
  for (int i = 0; i < l->n; i++) free(l->v[i]);
  free(l->v);
  memset(l, 0, sizeof *l);
}

int ka_command_is_output(const char *rel) {
  size_t n = strlen(rel);
  if (!strcmp(rel, "perf/benchmark_results.json")) return 1;
  return !strncmp(rel, "build/", 6) && !strchr(rel + 6, '/') && n > 12 &&
         !strcmp(rel + n - 12, "_report.json");
}

/* SHA-256 (hex) of root/rel; KA_OK or the read error. */
static int tc_hash_file(const char *root, const char *rel, char hex[65]) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  char *buf;
  size_t len;
  int rc = ka_read_file_nofollow(path, TC_MAX_FILE, &buf, &len);
  if (rc) return rc;
  ka_sha256_hex(buf, len, hex);
  free(buf);
  return KA_OK;
}

/* ---- loading */

static const char *const tc_phase_key[KA_CMD_NPHASES] = {"compile_command", "correctness_command",
                                                         "performance_command"};
static const char *const tc_timeout_key[KA_CMD_NPHASES] = {"compile_timeout", "correctness_timeout",
                                                           "performance_timeout"};

/* platform_support words to backends: nvidia/cuda -> cuda, amd/rocm/hip -> hip,
 * cpu/host -> host; other words are ignored. Absent: cuda and hip. */
static int tc_backends(yaml_document_t *doc, yaml_node_t *root, ka_task *t) {
  char *words[16] = {0};
  yaml_node_t *n = tc_get(doc, root, "platform_support");
  int k = n ? tc_strs(doc, n, words, 16) : 0;
  if (k < 0) return KA_EPARSE;
  if (!n) {
    t->backends[t->nbackends++] = strdup("cuda");
    t->backends[t->nbackends++] = strdup("hip");
    return KA_OK;
  }
  for (int i = 0; i < k; i++) {
    const char *w = words[i], *b = NULL;
    if (!strcasecmp(w, "nvidia") || !strcasecmp(w, "cuda"))
      b = "cuda";
    else if (!strcasecmp(w, "amd") || !strcasecmp(w, "rocm") || !strcasecmp(w, "hip"))
      b = "hip";
    else if (!strcasecmp(w, "cpu") || !strcasecmp(w, "host"))
      b = "host";
    int seen = 0;
    for (int j = 0; b && j < t->nbackends; j++) seen |= !strcmp(t->backends[j], b);
    if (b && !seen && t->nbackends < 4) t->backends[t->nbackends++] = strdup(b);
    free(words[i]);
  }
  return KA_OK;
}

static int tc_fail(char *err, size_t errlen, const char *file, const char *what) {
  return ka_seterr(err, errlen, KA_EPARSE, "%s: %s", file, what);
}

/* Reads the config's fields into t and t->command. */
static int tc_parse(yaml_document_t *doc, const char *file, ka_task *t, char *err, size_t errlen) {
  yaml_node_t *root = yaml_document_get_root_node(doc);
  if (!root || root->type != YAML_MAPPING_NODE)
    return tc_fail(err, errlen, file, "the document must be a mapping");
  ka_command_spec *c = t->command;
  for (int p = 0; p < KA_CMD_NPHASES; p++) {
    int k = tc_strs(doc, tc_get(doc, root, tc_phase_key[p]), c->commands[p], KA_CMD_MAX_COMMANDS);
    if (k < 0)
      return tc_fail(err, errlen, file, "a *_command must be a string or a list of strings");
    c->ncommands[p] = k;
    const char *to = tc_scalar(tc_get(doc, root, tc_timeout_key[p]));
    c->timeout_s[p] = KA_CMD_DEFAULT_TIMEOUT_S;
    if (to) {
      char *end;
      double v = strtod(to, &end);
      if (end == to || *end || !(v > 0) || v > 86400) { /* named, with its value (shown safe) */
        char shown[64];
        size_t n = 0;
        for (; to[n] && n < sizeof shown - 1; n++)
          shown[n] = (unsigned char)to[n] < 0x20 || to[n] == 0x7f ? '?' : to[n];
        shown[n] = 0;
        return ka_seterr(err, errlen, KA_EPARSE,
                         "%s: %s: '%s%s' is not a number of seconds in (0, 86400]", file,
                         tc_timeout_key[p], shown, to[n] ? "..." : "");
      }
      c->timeout_s[p] = v;
    }
    t->timeout_s += c->timeout_s[p] * (k ? k : 0);
  }
  c->max_speedup = KA_CMD_DEFAULT_MAX_SPEEDUP;
  const char *cap = tc_scalar(tc_get(doc, root, "max_speedup"));
  if (cap) {
    char *end;
    double v = strtod(cap, &end);
    if (*end || !(v > 1) || v > 1e6)
      return tc_fail(err, errlen, file, "max_speedup must be a number in (1, 1e6]");
    c->max_speedup = v;
  }
  if (!c->ncommands[KA_CMD_CORRECTNESS] && !c->ncommands[KA_CMD_PERFORMANCE])
    return tc_fail(err, errlen, file, "no correctness_command and no performance_command");
  if (!c->ncommands[KA_CMD_PERFORMANCE])
    return tc_fail(err, errlen, file, "performance_command is missing (nothing to time)");
  int ne = tc_strs(doc, tc_get(doc, root, "source_file_path"), t->editable, KA_MAX_EDITABLE);
  if (ne <= 0) return tc_fail(err, errlen, file, "source_file_path must name the editable file(s)");
  t->neditable = ne;
  for (int i = 0; i < ne; i++)
    if (!ka_path_is_safe(t->editable[i]))
      return ka_seterr(err, errlen, KA_EPARSE,
                       "%s: source_file_path '%s' is not a safe relative path", file,
                       t->editable[i]);
  t->source = strdup(t->editable[0]);
  int nt =
      tc_strs(doc, tc_get(doc, root, "target_kernel_functions"), c->targets, KA_CMD_MAX_TARGETS);
  if (nt < 0) return tc_fail(err, errlen, file, "target_kernel_functions must be a list of names");
  c->ntargets = nt;
  const char *ty = tc_scalar(tc_get(doc, root, "task_type"));
  t->type = strdup(ty && *ty ? ty : "command");
  /* the seed's task text (what to compute, the signature, tolerances) for the prompt */
  const char *ins = tc_scalar(tc_get(doc, tc_get(doc, root, "prompt"), "instructions"));
  if (ins && *ins && !(c->instructions = strdup(ins))) return KA_ENOMEM;
  const char *desc = tc_scalar(tc_get(doc, root, "description"));
  t->description = strdup(desc ? desc : "");
  if (tc_backends(doc, root, t))
    return tc_fail(err, errlen, file, "platform_support must be a list");
  t->language = strdup("python");
  t->mode = strdup("command");
  t->ref_split = -1;
  return t->type && t->description && t->language && t->mode && t->source ? KA_OK : KA_ENOMEM;
}

/* Lists the folder's files, hashes the harness (all but the editable set) and sets the
 * version: SHA-256 over every file's path and hash, config.yaml included. */
static int tc_hash(ka_task *t, char *err, size_t errlen) {
  tc_list l = {0};
  int rc = tc_walk(t->dir, "", 0, &l);
  if (rc) {
    tc_list_free(&l);
    return ka_seterr(err, errlen, rc, "%s: cannot list the folder", t->dir);
  }
  qsort(l.v, (size_t)l.n, sizeof *l.v, tc_cmp);
  for (int i = 0; i < t->neditable; i++) {
    int found = 0;
    for (int j = 0; j < l.n && !found; j++) found = !strcmp(l.v[j], t->editable[i]);
    if (!found) {
      tc_list_free(&l);
      return ka_seterr(err, errlen, KA_EPARSE, "%s: source_file_path %s is missing", t->dir,
                       t->editable[i]);
    }
  }
  ka_command_spec *c = t->command;
  ka_sb sb = {0};
  for (int j = 0; j < l.n && rc == KA_OK; j++) {
    char hex[65];
    rc = tc_hash_file(t->dir, l.v[j], hex);
    if (rc) {
      ka_seterr(err, errlen, rc, "%s/%s: %s", t->dir, l.v[j], ka_strerror(rc));
      break;
    }
    ka_sb_printf(&sb, "%s %s\n", hex, l.v[j]);
    if (ka_task_is_editable(t, l.v[j])) continue;
    if (c->nharness == KA_CMD_MAX_HARNESS) {
      rc = ka_seterr(err, errlen, KA_ETOOBIG, "%s: more than %d harness files", t->dir,
                     KA_CMD_MAX_HARNESS);
      break;
    }
    c->harness[c->nharness] = l.v[j], l.v[j] = NULL;
    memcpy(c->harness_sha[c->nharness++], hex, 65);
  }
  tc_list_free(&l);
  if (rc == KA_OK && sb.oom) rc = KA_ENOMEM;
  if (rc == KA_OK) {
    char hex[65];
    ka_sha256_hex(sb.s, sb.len, hex);
    t->version = strndup(hex, 16);
    if (!t->version) rc = KA_ENOMEM;
  }
  ka_sb_free(&sb);
  return rc;
}

/* prompt.md when the folder has one, else a text built from the config. */
static int tc_prompt(ka_task *t) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/prompt.md", t->dir);
  if (ka_read_file(path, 1 << 20, &t->prompt, NULL) == KA_OK) return KA_OK;
  ka_sb sb = {0};
  ka_sb_printf(&sb, "# %s\n\n", t->id);
  if (*t->description) ka_sb_printf(&sb, "%s\n\n", t->description);
  ka_sb_printf(&sb, "Task type: %s. Optimize the code in", t->type);
  for (int i = 0; i < t->neditable; i++) ka_sb_printf(&sb, "%s `%s`", i ? "," : "", t->editable[i]);
  if (t->command->ntargets) {
    ka_sb_puts(&sb, ", functions");
    for (int i = 0; i < t->command->ntargets; i++)
      ka_sb_printf(&sb, "%s `%s`", i ? "," : "", t->command->targets[i]);
  }
  ka_sb_puts(&sb,
             ", keeping its interface and results. The task's own scripts compile, check and "
             "time it.\n");
  if (t->command->instructions) ka_sb_printf(&sb, "\n%s\n", t->command->instructions);
  if (sb.oom) {
    ka_sb_free(&sb);
    return KA_ENOMEM;
  }
  t->prompt = ka_sb_take(&sb);
  return KA_OK;
}

int ka_command_task_load(const char *dir, const char *id, ka_task **out, char *err, size_t errlen) {
  *out = NULL;
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/config.yaml", dir);
  char *text;
  size_t len;
  int rc = ka_read_file(path, 1 << 20, &text, &len);
  if (rc) return ka_seterr(err, errlen, rc, "%s: %s", path, ka_strerror(rc));
  ka_task *t = calloc(1, sizeof *t);
  if (t) t->command = calloc(1, sizeof *t->command);
  if (!t || !t->command) {
    free(t);
    free(text);
    return KA_ENOMEM;
  }
  t->dir = realpath(dir, NULL);
  if (!t->dir) t->dir = strdup(dir);
  t->id = strdup(id);
  yaml_parser_t p;
  yaml_document_t doc;
  if (!yaml_parser_initialize(&p)) rc = KA_ENOMEM;
  if (rc == KA_OK) {
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    if (!yaml_parser_load(&p, &doc)) {
      rc = ka_seterr(err, errlen, KA_EPARSE, "%s:%lu: %s", path,
                     (unsigned long)p.problem_mark.line + 1, p.problem ? p.problem : "YAML error");
    } else {
      rc = tc_parse(&doc, path, t, err, errlen);
      yaml_document_delete(&doc);
    }
    yaml_parser_delete(&p);
  }
  free(text);
  if (rc == KA_OK && !t->id) rc = KA_ENOMEM;
  if (rc == KA_OK) rc = tc_hash(t, err, errlen);
  if (rc == KA_OK) rc = tc_prompt(t);
  if (rc) {
    ka_task_free(t);
    return rc;
  }
  *out = t;
  return KA_OK;
}

void ka_command_spec_free(ka_command_spec *c) {
  if (!c) return;
  for (int p = 0; p < KA_CMD_NPHASES; p++)
    for (int i = 0; i < c->ncommands[p]; i++) free(c->commands[p][i]);
  for (int i = 0; i < c->ntargets; i++) free(c->targets[i]);
  for (int i = 0; i < c->nharness; i++) free(c->harness[i]);
  free(c->instructions);
  free(c);
}

/* ---- registry */

static int tc_file_exists(const char *dir, const char *name) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int tc_add(ka_registry *r, ka_task *t) {
  ka_task **n = realloc(r->tasks, sizeof *n * (size_t)(r->ntasks + 1));
  if (!n) return KA_ENOMEM;
  r->tasks = n;
  r->tasks[r->ntasks++] = t;
  return KA_OK;
}

static int tc_scan(ka_registry *r, const char *rel, int depth, int skip_bad, char *err,
                   size_t errlen) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s%s%s", r->root, *rel ? "/" : "", rel);
  if (*rel && tc_file_exists(dir, "task.yaml")) return KA_OK; /* a task.yaml task */
  if (*rel && tc_file_exists(dir, "config.yaml")) {
    ka_task *t;
    char e2[512] = "";
    int rc = ka_command_task_load(dir, rel, &t, e2, sizeof e2);
    if (rc == KA_OK && ka_registry_find(r, rel)) {
      ka_task_free(t);
      return KA_OK;
    }
    if (rc == KA_OK) {
      if ((rc = tc_add(r, t)) != KA_OK) ka_task_free(t);
      return rc; /* out of memory: not a bad task, nothing to skip */
    }
    if (skip_bad) { /* recorded in r: a request for rel says why it is missing */
      fprintf(stderr, "kernelarena: skipping task %s: %s\n", dir, e2);
      return ka_registry_add_skip(r, rel, dir, e2);
    }
    return ka_seterr(err, errlen, rc, "%s", e2);
  }
  if (depth >= TC_MAX_DEPTH) return KA_OK;
  DIR *d = opendir(dir);
  if (!d) return KA_OK;
  tc_list l = {0};
  struct dirent *e;
  int rc = KA_OK;
  while (rc == KA_OK && (e = readdir(d))) {
    if (e->d_name[0] == '.' || !strcmp(e->d_name, "__pycache__")) continue;
    char **nv = realloc(l.v, sizeof *nv * (size_t)(l.n + 1));
    if (!nv) {
      rc = KA_ENOMEM;
      break;
    }
    l.v = nv;
    if (!(l.v[l.n] = strdup(e->d_name)))
      rc = KA_ENOMEM;
    else
      l.n++;
  }
  closedir(d);
  for (int i = 0; i < l.n && rc == KA_OK; i++) {
    char sub[PATH_MAX], full[PATH_MAX];
    snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", l.v[i]);
    snprintf(full, sizeof full, "%s/%s", r->root, sub);
    struct stat st;
    if (lstat(full, &st) == 0 && S_ISDIR(st.st_mode))
      rc = tc_scan(r, sub, depth + 1, skip_bad, err, errlen);
  }
  tc_list_free(&l);
  return rc;
}

int ka_command_scan(ka_registry *r, int skip_bad, char *err, size_t errlen) {
  return tc_scan(r, "", 0, skip_bad, err, errlen);
}

int ka_command_harness_changed(const ka_task *t, const char *root, char *what, size_t whatlen) {
  const ka_command_spec *c = t->command;
  for (int i = 0; c && i < c->nharness; i++) {
    char hex[65];
    if (tc_hash_file(root, c->harness[i], hex) != KA_OK || strcmp(hex, c->harness_sha[i])) {
      snprintf(what, whatlen, "%s", c->harness[i]);
      return 1;
    }
  }
  return 0;
}
