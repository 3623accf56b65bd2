#include "task.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include "ka_common.h"
#include "task_command.h"

/* ---- small helpers over libyaml's document tree */

typedef struct {
  yaml_document_t doc;
  const char *file;
  char *err;
  size_t errlen;
  int rc;
} ty_doc;

static int ty_fail(ty_doc *d, yaml_node_t *n, const char *fmt, const char *what) {
  if (d->rc == KA_OK) {
    char msg[256];
    snprintf(msg, sizeof msg, fmt, what ? what : "");
    ka_seterr(d->err, d->errlen, KA_EPARSE, "%s:%lu: %s", d->file,
              n ? (unsigned long)n->start_mark.line + 1 : 0UL, msg);
    d->rc = KA_EPARSE;
  }
  return KA_EPARSE;
}

static yaml_node_t *ty_get(ty_doc *d, yaml_node_t *map, const char *key) {
  if (!map || map->type != YAML_MAPPING_NODE) return NULL;
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(&d->doc, p->key);
    if (k && k->type == YAML_SCALAR_NODE && !strcmp((char *)k->data.scalar.value, key))
      return yaml_document_get_node(&d->doc, p->value);
  }
  return NULL;
}

static const char *ty_scalar(yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static char *ty_str(ty_doc *d, yaml_node_t *map, const char *key, int required) {
  yaml_node_t *n = ty_get(d, map, key);
  const char *s = ty_scalar(n);
  if (!s) {
    if (required) ty_fail(d, n ? n : map, "missing or non-scalar field '%s'", key);
    return NULL;
  }
  return strdup(s);
}

static int ty_double(ty_doc *d, yaml_node_t *n, double *out) {
  const char *s = ty_scalar(n);
  char *end;
  if (!s) return ty_fail(d, n, "expected a number%s", "");
  *out = strtod(s, &end);
  if (end == s || *end) return ty_fail(d, n, "expected a number, got '%s'", s);
  return KA_OK;
}

static int ty_i64(ty_doc *d, yaml_node_t *n, int64_t *out) {
  const char *s = ty_scalar(n);
  char *end;
  if (!s) return ty_fail(d, n, "expected an integer%s", "");
  long long v = strtoll(s, &end, 10);
  if (end == s || *end) return ty_fail(d, n, "expected an integer, got '%s'", s);
  *out = v;
  return KA_OK;
}

/* Sequence items as nodes; returns count or -1 if not a sequence. */
static int ty_seq(ty_doc *d, yaml_node_t *n, yaml_node_t **items, int max) {
  if (!n || n->type != YAML_SEQUENCE_NODE) return -1;
  int k = 0;
  for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
    if (k == max) {
      ty_fail(d, n, "too many items%s", "");
      return -1;
    }
    items[k++] = yaml_document_get_node(&d->doc, *it);
  }
  return k;
}

/* A sequence of scalars, or a single scalar, as a string list. */
static int ty_strlist(ty_doc *d, yaml_node_t *n, char **out, int max, const char *what) {
  if (n && n->type == YAML_SCALAR_NODE) {
    out[0] = strdup(ty_scalar(n));
    return 1;
  }
  yaml_node_t *items[KA_MAX_ARGS];
  int k = ty_seq(d, n, items, max < KA_MAX_ARGS ? max : KA_MAX_ARGS);
  if (k < 0) {
    ty_fail(d, n, "'%s' must be a list", what);
    return -1;
  }
  for (int i = 0; i < k; i++) {
    const char *s = ty_scalar(items[i]);
    if (!s) {
      for (int j = 0; j < i; j++) free(out[j]), out[j] = NULL; /* the caller keeps none */
      ty_fail(d, items[i], "'%s' items must be scalars", what);
      return -1;
    }
    out[i] = strdup(s);
  }
  return k;
}

static int ty_open(ty_doc *d, const char *file, const char *text, size_t len, char *err,
                   size_t errlen) {
  memset(d, 0, sizeof *d);
  d->file = file;
  d->err = err;
  d->errlen = errlen;
  yaml_parser_t p;
  if (!yaml_parser_initialize(&p)) return KA_ENOMEM;
  yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
  if (!yaml_parser_load(&p, &d->doc)) {
    ka_seterr(err, errlen, KA_EPARSE, "%s:%lu: %s", file, (unsigned long)p.problem_mark.line + 1,
              p.problem ? p.problem : "YAML error");
    yaml_parser_delete(&p);
    return KA_EPARSE;
  }
  yaml_parser_delete(&p);
  yaml_node_t *root = yaml_document_get_root_node(&d->doc);
  if (!root || root->type != YAML_MAPPING_NODE) {
    yaml_document_delete(&d->doc);
    return ka_seterr(err, errlen, KA_EPARSE, "%s: top level must be a mapping", file);
  }
  return KA_OK;
}

/* ---- dtypes */

static const struct {
  const char *name;
  size_t size;
} ka_dtypes[] = {
    [KA_DT_F32] = {"f32", 4},   [KA_DT_F64] = {"f64", 8}, [KA_DT_F16] = {"f16", 2},
    [KA_DT_BF16] = {"bf16", 2}, [KA_DT_I8] = {"i8", 1},   [KA_DT_U8] = {"u8", 1},
    [KA_DT_I32] = {"i32", 4},   [KA_DT_I64] = {"i64", 8},
};

size_t ka_dtype_size(ka_dtype dt) {
  return ka_dtypes[dt].size;
}
const char *ka_dtype_name(ka_dtype dt) {
  return ka_dtypes[dt].name;
}
int ka_dtype_parse(const char *s, ka_dtype *out) {
  for (size_t i = 0; s && i < sizeof ka_dtypes / sizeof ka_dtypes[0]; i++)
    if (!strcmp(s, ka_dtypes[i].name)) {
      *out = (ka_dtype)i;
      return KA_OK;
    }
  return KA_EPARSE;
}

/* ---- task */

int ka_task_param(const ka_task *t, const char *name) {
  for (int i = 0; i < t->nparams; i++)
    if (!strcmp(t->params[i].name, name)) return i;
  return -1;
}

int ka_task_tensor(const ka_task *t, const char *name) {
  for (int i = 0; i < t->ntensors; i++)
    if (!strcmp(t->tensors[i].name, name)) return i;
  return -1;
}

char *ka_task_baseline_path(const ka_task *t, const char *file, char *buf, size_t len) {
  snprintf(buf, len, "%s%s/%s", t->dir,
           t->command       ? ""
           : t->has_starter ? "/starter"
                            : "/baseline",
           file);
  return buf;
}

int ka_task_is_editable(const ka_task *t, const char *path) {
  for (int i = 0; i < t->neditable; i++)
    if (!strcmp(t->editable[i], path)) return 1;
  return 0;
}

void ka_task_case_vars(const ka_task *t, const ka_case *c, ka_vars *vars) {
  for (int i = 0; i < t->nparams; i++) ka_vars_set(vars, t->params[i].name, c->values[i]);
}

int ka_task_tensor_elems(const ka_task *t, int i, const ka_case *c, int64_t *elems, char *err,
                         size_t errlen) {
  ka_vars v = {0};
  ka_task_case_vars(t, c, &v);
  int64_t n = 1;
  for (int d = 0; d < t->tensors[i].ndim; d++) {
    int64_t e;
    int rc = ka_expr_eval(t->tensors[i].shape[d], &v, &e, err, errlen);
    if (rc) return rc;
    if (e < 0 || __builtin_mul_overflow(n, e, &n))
      return ka_seterr(err, errlen, KA_ERANGE, "tensor %s: bad size", t->tensors[i].name);
  }
  *elems = n;
  return KA_OK;
}

void ka_task_free(ka_task *t) {
  if (!t) return;
  free(t->id), free(t->type), free(t->language), free(t->mode), free(t->description);
  free(t->dir), free(t->version), free(t->source), free(t->launch_plan);
  free(t->entry_symbol), free(t->reference_symbol), free(t->bytes_expr);
  free(t->flops_expr), free(t->prompt);
  for (int i = 0; i < t->nbackends; i++) free(t->backends[i]);
  for (int i = 0; i < t->nparams; i++) free(t->params[i].name);
  for (int i = 0; i < t->ntensors; i++) {
    free(t->tensors[i].name);
    free(t->tensors[i].init_expr[0]), free(t->tensors[i].init_expr[1]);
    for (int d = 0; d < t->tensors[i].ndim; d++) free(t->tensors[i].shape[d]);
  }
  free(t->nondeterministic);
  for (int i = 0; i < t->ncases + t->nheld; i++) free(t->cases[i].name);
  free(t->cases);
  for (int i = 0; i < t->neditable; i++) free(t->editable[i]);
  for (int i = 0; i < t->nentry_args; i++) free(t->entry_args[i]);
  for (int i = 0; i < t->ntags; i++) free(t->tags[i]);
  for (int i = 0; i < t->nallowed_imports; i++) free(t->allowed_imports[i]);
  for (int i = 0; i < t->ndenied_imports; i++) free(t->denied_imports[i]);
  ka_command_spec_free(t->command);
  free(t);
}

static int task_cases(ty_doc *d, ka_task *t, yaml_node_t *n, int held, int *count) {
  yaml_node_t *items[64];
  int k = ty_seq(d, n, items, 64);
  if (k < 0) return ty_fail(d, n, "'%s' must be a list of cases", held ? "held_out" : "cases");
  ka_case *nc = realloc(t->cases, sizeof(ka_case) * (size_t)(t->ncases + t->nheld + k));
  if (!nc) return KA_ENOMEM;
  t->cases = nc;
  for (int i = 0; i < k; i++) {
    ka_case *c = &t->cases[t->ncases + t->nheld];
    memset(c, 0, sizeof *c);
    c->held_out = held;
    if (held)
      t->nheld++;
    else
      t->ncases++;
    c->name = ty_str(d, items[i], "name", 1);
    if (d->rc) return d->rc;
    for (int p = 0; p < t->nparams; p++) {
      yaml_node_t *v = ty_get(d, items[i], t->params[p].name);
      if (!v) return ty_fail(d, items[i], "case lacks param '%s'", t->params[p].name);
      if (ty_i64(d, v, &c->values[p])) return d->rc;
    }
  }
  *count = k;
  return KA_OK;
}

static int task_file_exists(const char *dir, const char *sub, const char *name) {
  char p[PATH_MAX];
  struct stat st;
  snprintf(p, sizeof p, "%s/%s%s%s", dir, sub, *sub ? "/" : "", name);
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

void ka_task_tolerance(const ka_task *t, int i, double *atol, double *rtol) {
  const ka_tensor_spec *ts = i >= 0 && i < t->ntensors ? &t->tensors[i] : NULL;
  *atol = ts && ts->has_atol ? ts->atol : t->atol;
  *rtol = ts && ts->has_rtol ? ts->rtol : t->rtol;
}

int ka_task_init_bounds(const ka_task *t, int i, const ka_case *c, double *a, double *b, char *err,
                        size_t errlen) {
  const ka_tensor_spec *ts = &t->tensors[i];
  double *dst[2] = {a, b};
  *a = ts->a, *b = ts->b;
  ka_vars v = {0};
  ka_task_case_vars(t, c, &v);
  for (int j = 0; j < 2; j++) {
    if (!ts->init_expr[j]) continue;
    int64_t x;
    char e[256];
    int rc = ka_expr_eval(ts->init_expr[j], &v, &x, e, sizeof e);
    if (rc)
      return ka_seterr(err, errlen, rc, "tensor %s: init '%s' in case %s: %s", ts->name,
                       ts->init_expr[j], c->name, e);
    *dst[j] = (double)x;
  }
  if (ts->dist != KA_DIST_NORMAL && *a > *b)
    return ka_seterr(err, errlen, KA_ERANGE, "tensor %s: init low %.17g > high %.17g in case %s",
                     ts->name, *a, *b, c->name);
  return KA_OK;
}

/* init.<key> of an input: a number into *num, or else an integer expression over params
 * kept as text in *expr (checked against every case by task_check_init). */
static int task_init_num(ty_doc *d, yaml_node_t *init, const char *tensor, const char *key,
                         double *num, char **expr) {
  yaml_node_t *n = ty_get(d, init, key);
  const char *s = ty_scalar(n);
  char msg[160];
  if (!s || !*s) {
    snprintf(msg, sizeof msg, "input %s: init.%s must be a number or an expression", tensor, key);
    return ty_fail(d, n ? n : init, "%s", msg);
  }
  char *end;
  *num = strtod(s, &end);
  if (end != s && !*end) return KA_OK;
  *num = 0;
  *expr = strdup(s);
  return *expr ? KA_OK : KA_ENOMEM;
}

/* Every init expression evaluates in every case (and randint/uniform low <= high). */
static int task_check_init(ty_doc *d, ka_task *t, yaml_node_t *root) {
  for (int i = 0; i < t->ntensors; i++) {
    if (!t->tensors[i].init_expr[0] && !t->tensors[i].init_expr[1]) continue;
    for (int c = 0; c < t->ncases + t->nheld; c++) {
      double a, b;
      char e[256];
      if (ka_task_init_bounds(t, i, &t->cases[c], &a, &b, e, sizeof e))
        return ty_fail(d, root, "%s", e);
    }
  }
  return KA_OK;
}

/* An output's own atol or rtol (optional): a number >= 0. */
static int task_out_tol(ty_doc *d, yaml_node_t *tensor, const char *name, const char *key,
                        double *v, int *has) {
  yaml_node_t *n = ty_get(d, tensor, key);
  if (!n) return KA_OK;
  const char *s = ty_scalar(n);
  char *end = NULL;
  double x = s ? strtod(s, &end) : NAN;
  if (!s || end == s || *end || !(x >= 0) || isinf(x)) {
    char msg[200];
    snprintf(msg, sizeof msg, "tensor %s: %s must be a finite number >= 0, got '%.40s'", name, key,
             s ? s : "(not a scalar)");
    return ty_fail(d, n, "%s", msg);
  }
  *v = x;
  *has = 1;
  return KA_OK;
}

/* 1 if expression expr names identifier id (a whole word). */
static int task_expr_names(const char *expr, const char *id) {
  size_t n = strlen(id);
  for (const char *p = expr; *p;) {
    if (isalpha((unsigned char)*p) || *p == '_') {
      const char *q = p;
      while (isalnum((unsigned char)*q) || *q == '_') q++;
      if ((size_t)(q - p) == n && !strncmp(p, id, n)) return 1;
      p = q;
    } else {
      p++;
    }
  }
  return 0;
}

/* `reference.split` (task.h, ref_split): the param's index and which tensors are cut.
 * Returns KA_OK (ref_split -1 when absent) or KA_EPARSE through d. */
static int task_parse_split(ty_doc *d, ka_task *t, yaml_node_t *ref) {
  t->ref_split = -1;
  t->ref_sliced = 0;
  yaml_node_t *sp = ref ? ty_get(d, ref, "split") : NULL;
  if (!sp) return KA_OK;
  const char *name = ty_scalar(sp);
  int p = name ? ka_task_param(t, name) : -1;
  if (p < 0) return ty_fail(d, sp, "reference.split must name a param of the task%s", "");
  for (int i = 0; i < t->ntensors; i++) {
    const ka_tensor_spec *ts = &t->tensors[i];
    const char *lead = ts->shape[0];
    while (isspace((unsigned char)*lead)) lead++;
    size_t n = strlen(name);
    int cut = !strncmp(lead, name, n);
    for (const char *q = lead + n; cut && *q; q++) cut = isspace((unsigned char)*q) != 0;
    for (int k = cut; k < ts->ndim; k++)
      if (task_expr_names(ts->shape[k], name))
        return ty_fail(d, sp,
                       "reference.split: tensor %s names the split param other than as its "
                       "leading dimension, so it cannot be cut there",
                       ts->name);
    if (!cut && ts->role == KA_ROLE_OUTPUT)
      return ty_fail(d, sp,
                     "reference.split: output %s does not have the split param as its leading "
                     "dimension",
                     ts->name);
    if (cut) t->ref_sliced |= 1u << i;
  }
  t->ref_split = p;
  return KA_OK;
}

/* A `starter/` folder (instruction2triton): the workspace starts from it, so every
 * editable file must be there too. */
static int task_check_starter(ty_doc *d, ka_task *t, yaml_node_t *root) {
  char p[PATH_MAX];
  struct stat st;
  snprintf(p, sizeof p, "%s/starter", t->dir);
  if (stat(p, &st) != 0) return KA_OK;
  if (!S_ISDIR(st.st_mode)) return ty_fail(d, root, "starter is not a folder%s", "");
  t->has_starter = 1;
  for (int i = 0; i < t->neditable; i++)
    if (!task_file_exists(t->dir, "starter", t->editable[i]))
      return ty_fail(d, root, "starter/%s is missing", t->editable[i]);
  return KA_OK;
}

static int task_parse(ty_doc *d, ka_task *t) {
  yaml_node_t *root = yaml_document_get_root_node(&d->doc);
  t->id = ty_str(d, root, "id", 1);
  t->type = ty_str(d, root, "type", 1);
  t->language = ty_str(d, root, "language", 1);
  t->mode = ty_str(d, root, "mode", 1);
  t->description = ty_str(d, root, "description", 0);
  t->source = ty_str(d, root, "source", 1);
  t->bytes_expr = ty_str(d, root, "bytes", 0);
  t->flops_expr = ty_str(d, root, "flops", 0);
  if (d->rc) return d->rc;
  if (strcmp(t->mode, "rtc") && strcmp(t->mode, "module"))
    return ty_fail(d, root, "mode must be rtc or module, not '%s'", t->mode);
  if (strcmp(t->language, "hip") && strcmp(t->language, "cuda") && strcmp(t->language, "c") &&
      strcmp(t->language, "triton"))
    return ty_fail(d, root, "language must be hip, cuda, triton or c, not '%s'", t->language);
  if (!strcmp(t->language, "triton") && strcmp(t->mode, "rtc"))
    return ty_fail(d, root, "language triton needs mode rtc, not '%s'", t->mode);

  yaml_node_t *be = ty_get(d, root, "backends");
  if (be) {
    t->nbackends = ty_strlist(d, be, t->backends, 4, "backends");
    if (t->nbackends < 0) return d->rc;
  } else if (!strcmp(t->language, "c")) {
    t->backends[t->nbackends++] = strdup("host");
  } else {
    t->backends[t->nbackends++] = strdup("cuda");
    if (!strcmp(t->language, "hip")) t->backends[t->nbackends++] = strdup("hip");
  }

  yaml_node_t *tg = ty_get(d, root, "tags");
  if (tg) {
    t->ntags = ty_strlist(d, tg, t->tags, KA_MAX_TAGS, "tags");
    if (t->ntags < 0) {
      t->ntags = 0;
      return d->rc;
    }
  }
  /* import allow-list of module mode (gpuexec/sandbox/sandbox.h): symbol glob patterns */
  for (int w = 0; w < 2; w++) {
    const char *key = w ? "denied_imports" : "allowed_imports";
    char **list = w ? t->denied_imports : t->allowed_imports;
    int *n = w ? &t->ndenied_imports : &t->nallowed_imports;
    yaml_node_t *im = ty_get(d, root, key);
    if (!im) continue;
    if (strcmp(t->mode, "module")) return ty_fail(d, im, "'%s' applies to mode module only", key);
    int k = ty_strlist(d, im, list, KA_MAX_IMPORTS, key);
    if (k < 0) return d->rc;
    *n = k;
    for (int i = 0; i < k; i++)
      if (!*list[i] || strspn(list[i],
                              "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                              "0123456789_.*?[]!-") != strlen(list[i]))
        return ty_fail(d, im, "'%s' patterns are symbol names with * ? [ ] only", key);
  }

  yaml_node_t *items[KA_MAX_ARGS];
  int k = ty_seq(d, ty_get(d, root, "params"), items, KA_MAX_PARAMS);
  if (k < 0) return ty_fail(d, root, "'params' must be a list%s", "");
  for (int i = 0; i < k; i++) {
    t->params[i].name = ty_str(d, items[i], "name", 1);
    t->nparams = i + 1;
    char *ty = ty_str(d, items[i], "type", 0);
    t->params[i].is_i32 = ty && !strcmp(ty, "i32");
    if (ty && strcmp(ty, "i32") && strcmp(ty, "i64")) {
      free(ty);
      return ty_fail(d, items[i], "param type must be i32 or i64%s", "");
    }
    free(ty);
    if (d->rc) return d->rc;
  }

  k = ty_seq(d, ty_get(d, root, "tensors"), items, KA_MAX_TENSORS);
  if (k <= 0) return ty_fail(d, root, "'tensors' must be a non-empty list%s", "");
  for (int i = 0; i < k; i++) {
    ka_tensor_spec *ts = &t->tensors[i];
    t->ntensors = i + 1;
    ts->name = ty_str(d, items[i], "name", 1);
    char *dt = ty_str(d, items[i], "dtype", 1);
    char *role = ty_str(d, items[i], "role", 1);
    if (d->rc) {
      free(dt), free(role);
      return d->rc;
    }
    int bad_dt = ka_dtype_parse(dt, &ts->dtype);
    int is_in = !strcmp(role, "input"), is_out = !strcmp(role, "output");
    free(dt);
    free(role);
    if (bad_dt) return ty_fail(d, items[i], "tensor %s: unknown dtype", ts->name);
    if (!is_in && !is_out)
      return ty_fail(d, items[i], "tensor %s: role must be input or output", ts->name);
    ts->role = is_in ? KA_ROLE_INPUT : KA_ROLE_OUTPUT;
    ts->ndim = ty_strlist(d, ty_get(d, items[i], "shape"), ts->shape, KA_MAX_DIMS, "shape");
    if (ts->ndim <= 0) {
      ts->ndim = 0;
      return ty_fail(d, items[i], "tensor %s: shape must be a non-empty list", ts->name);
    }
    ts->task = t;
    if (is_in && (ty_get(d, items[i], "atol") || ty_get(d, items[i], "rtol")))
      return ty_fail(d, items[i], "tensor %s: atol/rtol apply to outputs only", ts->name);
    if (!is_in && (task_out_tol(d, items[i], ts->name, "atol", &ts->atol, &ts->has_atol) ||
                   task_out_tol(d, items[i], ts->name, "rtol", &ts->rtol, &ts->has_rtol)))
      return d->rc;
    if (is_in) {
      yaml_node_t *init = ty_get(d, items[i], "init");
      const char *dist = ty_scalar(ty_get(d, init, "dist"));
      if (!dist) return ty_fail(d, items[i], "input %s needs init.dist", ts->name);
      int normal = !strcmp(dist, "normal");
      if (normal)
        ts->dist = KA_DIST_NORMAL;
      else if (!strcmp(dist, "uniform") || !strcmp(dist, "randint"))
        ts->dist = dist[0] == 'u' ? KA_DIST_UNIFORM : KA_DIST_RANDINT;
      else
        return ty_fail(d, init, "unknown init.dist '%s'", dist);
      if (task_init_num(d, init, ts->name, normal ? "mean" : "low", &ts->a, &ts->init_expr[0]) ||
          task_init_num(d, init, ts->name, normal ? "std" : "high", &ts->b, &ts->init_expr[1]))
        return d->rc ? d->rc : KA_ENOMEM;
    }
  }
  /* every shape expression must name only params */
  for (int i = 0; i < t->ntensors; i++) {
    ka_vars v = {0};
    for (int p = 0; p < t->nparams; p++) ka_vars_set(&v, t->params[p].name, 1);
    for (int dd = 0; dd < t->tensors[i].ndim; dd++) {
      int64_t x;
      char e[256];
      if (ka_expr_eval(t->tensors[i].shape[dd], &v, &x, e, sizeof e))
        return ty_fail(d, root, "%s", e);
    }
  }

  yaml_node_t *tol = ty_get(d, root, "tolerance");
  if (!tol || ty_double(d, ty_get(d, tol, "atol"), &t->atol) ||
      ty_double(d, ty_get(d, tol, "rtol"), &t->rtol))
    return ty_fail(d, root, "tolerance {atol, rtol} required%s", "");

  int n;
  if (task_cases(d, t, ty_get(d, root, "cases"), 0, &n)) return d->rc ? d->rc : KA_ENOMEM;
  if (n < 1) return ty_fail(d, root, "at least one case required%s", "");
  yaml_node_t *ho = ty_get(d, root, "held_out");
  if (ho && task_cases(d, t, ho, 1, &n)) return d->rc ? d->rc : KA_ENOMEM;
  if (task_check_init(d, t, root)) return d->rc;

  t->neditable =
      ty_strlist(d, ty_get(d, root, "editable"), t->editable, KA_MAX_EDITABLE, "editable");
  if (t->neditable <= 0) {
    t->neditable = 0;
    return ty_fail(d, root, "'editable' must list at least one file%s", "");
  }
  for (int i = 0; i < t->neditable; i++) {
    if (!ka_path_is_safe(t->editable[i]))
      return ty_fail(d, root, "editable path '%s' is not a safe relative path", t->editable[i]);
    if (!task_file_exists(t->dir, "baseline", t->editable[i]))
      return ty_fail(d, root, "baseline/%s is missing", t->editable[i]);
  }
  if (task_check_starter(d, t, root)) return d->rc;
  if (!ka_task_is_editable(t, t->source))
    return ty_fail(d, root, "source '%s' must be an editable file", t->source);

  if (!strcmp(t->mode, "rtc")) {
    t->launch_plan = ty_str(d, root, "launch_plan", 1);
    if (d->rc) return d->rc;
    if (!ka_task_is_editable(t, t->launch_plan))
      return ty_fail(d, root, "launch_plan '%s' must be an editable file", t->launch_plan);
  } else {
    yaml_node_t *entry = ty_get(d, root, "entry");
    t->entry_symbol = ty_str(d, entry ? entry : root, "symbol", 1);
    if (d->rc) return d->rc;
    t->nentry_args =
        ty_strlist(d, ty_get(d, entry, "args"), t->entry_args, KA_MAX_ARGS, "entry.args");
    if (t->nentry_args < 0) {
      t->nentry_args = 0;
      return d->rc;
    }
    for (int i = 0; i < t->nentry_args; i++)
      if (ka_task_param(t, t->entry_args[i]) < 0 && ka_task_tensor(t, t->entry_args[i]) < 0)
        return ty_fail(d, entry, "entry arg '%s' is neither a param nor a tensor",
                       t->entry_args[i]);
  }
  yaml_node_t *ref = ty_get(d, root, "reference");
  t->reference_symbol = ty_str(d, ref ? ref : root, "symbol", 1);
  if (d->rc) return d->rc;
  if (task_parse_split(d, t, ref)) return d->rc;
  if (!task_file_exists(t->dir, "", "reference.c"))
    return ty_fail(d, root, "reference.c is missing%s", "");
  yaml_node_t *to = ty_get(d, root, "timeout_s");
  t->timeout_s = 60;
  if (to && ty_double(d, to, &t->timeout_s)) return d->rc;
  yaml_node_t *nd = ty_get(d, root, "nondeterministic");
  if (nd) {
    const char *why = ty_scalar(nd);
    if (!why || strlen(why) < 8)
      return ty_fail(d, nd, "'nondeterministic' must give the reason (a sentence)%s", "");
    t->nondeterministic = strdup(why);
  }
  yaml_node_t *fi = ty_get(d, root, "fresh_inputs");
  if (fi) {
    const char *v = ty_scalar(fi);
    if (v && !strcmp(v, "true"))
      t->fresh_inputs = 1;
    else if (!v || strcmp(v, "false"))
      return ty_fail(d, fi, "'fresh_inputs' must be true or false%s", "");
  }
  return KA_OK;
}

/* The version is a hash over everything that defines the task. */
static int task_version(ka_task *t, const char *yaml, size_t ylen) {
  ka_sb sb = {0};
  ka_sb_append(&sb, yaml, ylen);
  const char *extra[2 * KA_MAX_EDITABLE + 2];
  char paths[2 * KA_MAX_EDITABLE + 2][PATH_MAX];
  int ne = 0;
  for (int i = 0; i < t->neditable; i++) {
    snprintf(paths[ne], PATH_MAX, "%s/baseline/%s", t->dir, t->editable[i]);
    extra[ne] = paths[ne];
    ne++;
  }
  for (int i = 0; t->has_starter && i < t->neditable; i++) {
    snprintf(paths[ne], PATH_MAX, "%s/starter/%s", t->dir, t->editable[i]);
    extra[ne] = paths[ne];
    ne++;
  }
  snprintf(paths[ne], PATH_MAX, "%s/reference.c", t->dir);
  extra[ne] = paths[ne];
  ne++;
  /* a PyTorch task's module (torch2cuda, torch2triton): what its torch reference runs */
  snprintf(paths[ne], PATH_MAX, "%s/model.py", t->dir);
  extra[ne] = paths[ne];
  ne++;
  for (int i = 0; i < ne; i++) {
    char *buf;
    size_t len;
    if (ka_read_file(extra[i], 16 << 20, &buf, &len) == KA_OK) {
      ka_sb_printf(&sb, "\n--%d--\n", i);
      ka_sb_append(&sb, buf, len);
      free(buf);
    }
  }
  if (sb.oom) {
    ka_sb_free(&sb);
    return KA_ENOMEM;
  }
  char hex[65];
  ka_sha256_hex(sb.s, sb.len, hex);
  ka_sb_free(&sb);
  t->version = strndup(hex, 16);
  return t->version ? KA_OK : KA_ENOMEM;
}

int ka_task_load(const char *dir, ka_task **out, char *err, size_t errlen) {
  *out = NULL;
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/task.yaml", dir);
  char *text;
  size_t len;
  int rc = ka_read_file(path, 1 << 20, &text, &len);
  if (rc) return ka_seterr(err, errlen, rc, "%s: %s", path, ka_strerror(rc));
  ka_task *t = calloc(1, sizeof *t);
  if (!t) {
    free(text);
    return KA_ENOMEM;
  }
  /* absolute, so that processes running in other folders (runners) find it */
  t->dir = realpath(dir, NULL);
  if (!t->dir) t->dir = strdup(dir);
  ty_doc d;
  rc = ty_open(&d, path, text, len, err, errlen);
  if (rc == KA_OK) {
    rc = task_parse(&d, t);
    yaml_document_delete(&d.doc);
  }
  if (rc == KA_OK) rc = task_version(t, text, len);
  free(text);
  if (rc == KA_OK) {
    snprintf(path, sizeof path, "%s/prompt.md", dir);
    rc = ka_read_file(path, 1 << 20, &t->prompt, NULL);
    if (rc) ka_seterr(err, errlen, rc, "%s: %s", path, ka_strerror(rc));
  }
  if (rc) {
    ka_task_free(t);
    return rc;
  }
  *out = t;
  return KA_OK;
}

/* ---- registry */

static int reg_add(ka_registry *r, ka_task *t) {
  ka_task **n = realloc(r->tasks, sizeof *n * (size_t)(r->ntasks + 1));
  if (!n) return KA_ENOMEM;
  r->tasks = n;
  r->tasks[r->ntasks++] = t;
  return KA_OK;
}

/* A task folder skipped at load (skip_bad): the line on stderr and the record in r. */
static int reg_skip(ka_registry *r, const char *dir, const char *id, const char *why) {
  fprintf(stderr, "kernelarena: skipping task %s: %s\n", dir, why);
  return ka_registry_add_skip(r, id, dir, why);
}

/* s with every occurrence of from replaced by to (malloc'd; NULL when memory ran out). */
static char *reg_replace(const char *s, const char *from, const char *to) {
  size_t fl = strlen(from), tl = strlen(to), n = 0;
  for (const char *p = s; fl && (p = strstr(p, from)); p += fl) n++;
  char *out = malloc(strlen(s) + n * tl + 1), *o = out;
  if (!out) return NULL;
  for (const char *p = s, *q; *p; p = q + fl) {
    q = fl ? strstr(p, from) : NULL;
    if (!q) {
      strcpy(o, p);
      return out;
    }
    memcpy(o, p, (size_t)(q - p)), o += q - p;
    memcpy(o, to, tl), o += tl;
  }
  *o = 0;
  return out;
}

int ka_registry_add_skip(ka_registry *r, const char *id, const char *dir, const char *reason) {
  ka_registry_skip *n = realloc(r->skipped, sizeof *n * (size_t)(r->nskipped + 1));
  if (!n) return KA_ENOMEM;
  r->skipped = n;
  char *i = strdup(id), *w = reg_replace(reason, dir ? dir : "", id);
  if (!i || !w) {
    free(i);
    free(w);
    return KA_ENOMEM;
  }
  r->skipped[r->nskipped++] = (ka_registry_skip){i, w};
  return KA_OK;
}

const char *ka_registry_skipped(const ka_registry *r, const char *id) {
  for (int i = 0; r && id && i < r->nskipped; i++)
    if (!strcmp(r->skipped[i].id, id)) return r->skipped[i].reason;
  return NULL;
}

static int reg_cmp(const void *a, const void *b) {
  return strcmp((*(ka_task *const *)a)->id, (*(ka_task *const *)b)->id);
}

int ka_registry_load(const char *root, int skip_bad, ka_registry **out, char *err, size_t errlen) {
  *out = NULL;
  ka_registry *r = calloc(1, sizeof *r);
  if (!r) return KA_ENOMEM;
  r->root = strdup(root);
  DIR *fam = opendir(root);
  if (!fam) {
    int e = errno;
    ka_registry_free(r);
    return ka_seterr(err, errlen, KA_ENOENT, "task folder %s: cannot open: %s", root, strerror(e));
  }
  int rc = KA_OK;
  struct dirent *f;
  while (rc == KA_OK && (f = readdir(fam))) {
    if (f->d_name[0] == '.') continue;
    char fdir[PATH_MAX];
    snprintf(fdir, sizeof fdir, "%s/%s", root, f->d_name);
    DIR *td = opendir(fdir);
    if (!td) continue;
    struct dirent *e;
    while (rc == KA_OK && (e = readdir(td))) {
      if (e->d_name[0] == '.') continue;
      char tdir[PATH_MAX];
      snprintf(tdir, sizeof tdir, "%s/%s", fdir, e->d_name);
      if (!task_file_exists(tdir, "", "task.yaml")) continue;
      char want[PATH_MAX];
      snprintf(want, sizeof want, "%s/%s", f->d_name, e->d_name);
      ka_task *t = NULL;
      char e2[512] = "";
      int lrc = ka_task_load(tdir, &t, e2, sizeof e2);
      if (lrc == KA_OK && strcmp(want, t->id)) {
        lrc = ka_seterr(e2, sizeof e2, KA_EPARSE, "%s: id '%s' does not match its folder '%s'",
                        tdir, t->id, want);
        ka_task_free(t);
      }
      if (lrc) {
        if (!skip_bad)
          rc = ka_seterr(err, errlen, lrc, "%s", e2);
        else
          rc = reg_skip(r, tdir, want, e2);
        continue;
      }
      if (reg_add(r, t)) {
        ka_task_free(t);
        rc = KA_ENOMEM;
      }
    }
    closedir(td);
  }
  closedir(fam);
  if (rc == KA_OK) rc = ka_command_scan(r, skip_bad, err, errlen);
  if (rc) {
    ka_registry_free(r);
    return rc;
  }
  if (r->ntasks > 1) qsort(r->tasks, (size_t)r->ntasks, sizeof *r->tasks, reg_cmp);
  *out = r;
  return KA_OK;
}

void ka_registry_free(ka_registry *r) {
  if (!r) return;
  for (int i = 0; i < r->ntasks; i++) ka_task_free(r->tasks[i]);
  free(r->tasks);
  for (int i = 0; i < r->nskipped; i++) free(r->skipped[i].id), free(r->skipped[i].reason);
  free(r->skipped);
  free(r->root);
  free(r);
}

const ka_task *ka_registry_find(const ka_registry *r, const char *id) {
  for (int i = 0; r && id && i < r->ntasks; i++)
    if (!strcmp(r->tasks[i]->id, id)) return r->tasks[i];
  return NULL;
}

/* ---- launch plans */

void ka_plan_free(ka_plan *p) {
  if (!p) return;
  for (int i = 0; i < p->nkernels; i++) free(p->kernels[i]);
  for (int i = 0; i < p->nscratch; i++) free(p->scratch[i].name), free(p->scratch[i].count);
  for (int i = 0; i < p->nlaunches; i++) {
    ka_plan_launch *l = &p->launches[i];
    free(l->kernel);
    free(l->shared_bytes);
    for (int j = 0; j < 3; j++) free(l->grid[j]), free(l->block[j]);
    for (int j = 0; j < l->nargs; j++) free(l->args[j]);
    for (int j = 0; j < l->nconstexprs; j++)
      free(l->constexpr_names[j]), free(l->constexpr_values[j]);
  }
  free(p);
}

static int plan_is_scratch(const ka_plan *p, const char *name) {
  for (int i = 0; i < p->nscratch; i++)
    if (!strcmp(p->scratch[i].name, name)) return 1;
  return 0;
}

static int plan_dims(ty_doc *d, yaml_node_t *n, char **dims, const char *what) {
  int k = ty_strlist(d, n, dims, 3, what);
  if (k <= 0) return ty_fail(d, n, "'%s' must list 1 to 3 expressions", what);
  for (int j = k; j < 3; j++) dims[j] = strdup("1");
  return KA_OK;
}

/* An integer in [lo, hi] at key of launch item (absent: def) into *out. */
static int plan_int(ty_doc *d, yaml_node_t *item, const char *key, int64_t lo, int64_t hi,
                    int64_t def, int *out) {
  yaml_node_t *n = ty_get(d, item, key);
  int64_t v = def;
  if (n && ty_i64(d, n, &v)) return d->rc;
  if (v < lo || v > hi) return ty_fail(d, n ? n : item, "'%s' out of range", key);
  *out = (int)v;
  return KA_OK;
}

/* 1 if s is an identifier (a Python parameter name). */
static int plan_ident(const char *s) {
  if (!s || !(isalpha((unsigned char)*s) || *s == '_')) return 0;
  for (; *s; s++)
    if (!isalnum((unsigned char)*s) && *s != '_') return 0;
  return 1;
}

/* A constexpr value: an integer literal (at most 18 digits: it fits an int64) or true/false. */
static int plan_constexpr_ok(const char *s) {
  if (!s) return 0;
  if (!strcmp(s, "true") || !strcmp(s, "false")) return 1;
  const char *p = s + (*s == '-');
  size_t n = strlen(p);
  if (n == 0 || n > 18) return 0;
  for (; *p; p++)
    if (!isdigit((unsigned char)*p)) return 0;
  return 1;
}

/* The triton fields of one launch (docs/tasks.md): num_warps, num_stages, constexprs;
 * block and shared_bytes are not the plan's to give (the compile decides them). */
static int plan_triton(ty_doc *d, yaml_node_t *item, ka_plan_launch *l) {
  if (!plan_ident(l->kernel) || strlen(l->kernel) > 100)
    return ty_fail(d, item, "kernel '%s' is not a Python identifier (at most 100 characters)",
                   l->kernel);
  if (ty_get(d, item, "block") || ty_get(d, item, "shared_bytes"))
    return ty_fail(d, item,
                   "a triton launch gives num_warps (block = 32 x num_warps) and no "
                   "block or shared_bytes (the compile decides the shared memory)%s",
                   "");
  if (plan_int(d, item, "num_warps", 1, 32, 4, &l->num_warps) ||
      plan_int(d, item, "num_stages", 1, 8, 3, &l->num_stages))
    return d->rc;
  if (l->num_warps & (l->num_warps - 1))
    return ty_fail(d, item, "num_warps must be a power of 2%s", "");
  char b[16];
  snprintf(b, sizeof b, "%d", 32 * l->num_warps);
  l->block[0] = strdup(b);
  l->block[1] = strdup("1");
  l->block[2] = strdup("1");
  yaml_node_t *ce = ty_get(d, item, "constexprs");
  if (!ce) return KA_OK;
  if (ce->type != YAML_MAPPING_NODE) return ty_fail(d, ce, "'constexprs' must be a mapping%s", "");
  for (yaml_node_pair_t *pr = ce->data.mapping.pairs.start; pr < ce->data.mapping.pairs.top; pr++) {
    if (l->nconstexprs == KA_MAX_ARGS) return ty_fail(d, ce, "too many constexprs%s", "");
    const char *k = ty_scalar(yaml_document_get_node(&d->doc, pr->key));
    yaml_node_t *vn = yaml_document_get_node(&d->doc, pr->value);
    const char *v = ty_scalar(vn);
    if (!plan_ident(k))
      return ty_fail(d, ce, "constexpr name '%s' is not an identifier", k ? k : "");
    if (!plan_constexpr_ok(v))
      return ty_fail(d, vn ? vn : ce, "constexpr %s: want an integer or true/false", k);
    for (int j = 0; j < l->nconstexprs; j++)
      if (!strcmp(l->constexpr_names[j], k)) return ty_fail(d, ce, "constexpr %s given twice", k);
    l->constexpr_names[l->nconstexprs] = strdup(k);
    l->constexpr_values[l->nconstexprs++] = strdup(v);
  }
  return KA_OK;
}

static int plan_parse(ty_doc *d, const ka_task *t, ka_plan *p) {
  yaml_node_t *root = yaml_document_get_root_node(&d->doc);
  p->nkernels = ty_strlist(d, ty_get(d, root, "kernels"), p->kernels, KA_MAX_LAUNCHES, "kernels");
  if (p->nkernels <= 0) {
    p->nkernels = 0;
    return ty_fail(d, root, "'kernels' must list the kernel names%s", "");
  }
  yaml_node_t *sc = ty_get(d, root, "scratch");
  if (sc) {
    if (sc->type != YAML_MAPPING_NODE) return ty_fail(d, sc, "'scratch' must be a mapping%s", "");
    for (yaml_node_pair_t *pr = sc->data.mapping.pairs.start; pr < sc->data.mapping.pairs.top;
         pr++) {
      if (p->nscratch == KA_MAX_SCRATCH) return ty_fail(d, sc, "too many scratch buffers%s", "");
      yaml_node_t *k = yaml_document_get_node(&d->doc, pr->key);
      yaml_node_t *v = yaml_document_get_node(&d->doc, pr->value);
      ka_plan_scratch *s = &p->scratch[p->nscratch++];
      s->name = strdup(ty_scalar(k) ? ty_scalar(k) : "");
      char *dt = ty_str(d, v, "dtype", 1);
      s->count = ty_str(d, v, "count", 1);
      if (d->rc) {
        free(dt);
        return d->rc;
      }
      int bad = ka_dtype_parse(dt, &s->dtype);
      free(dt);
      if (bad) return ty_fail(d, v, "scratch %s: unknown dtype", s->name);
      if (ka_task_param(t, s->name) >= 0 || ka_task_tensor(t, s->name) >= 0)
        return ty_fail(d, v, "scratch name '%s' shadows a tensor or param", s->name);
    }
  }
  yaml_node_t *items[KA_MAX_LAUNCHES];
  int k = ty_seq(d, ty_get(d, root, "launches"), items, KA_MAX_LAUNCHES);
  if (k <= 0) return ty_fail(d, root, "'launches' must be a non-empty list%s", "");
  for (int i = 0; i < k; i++) {
    ka_plan_launch *l = &p->launches[i];
    p->nlaunches = i + 1;
    l->kernel = ty_str(d, items[i], "kernel", 1);
    if (d->rc) return d->rc;
    int known = 0;
    for (int j = 0; j < p->nkernels; j++) known |= !strcmp(p->kernels[j], l->kernel);
    if (!known)
      return ty_fail(d, items[i], "launch of '%s', which 'kernels' does not list", l->kernel);
    if (plan_dims(d, ty_get(d, items[i], "grid"), l->grid, "grid")) return d->rc;
    if (!strcmp(t->language, "triton")) {
      if (plan_triton(d, items[i], l)) return d->rc;
    } else {
      static const char *const only[] = {"num_warps", "num_stages", "constexprs", NULL};
      for (int j = 0; only[j]; j++)
        if (ty_get(d, items[i], only[j]))
          return ty_fail(d, items[i], "'%s' is for language triton only", only[j]);
      if (plan_dims(d, ty_get(d, items[i], "block"), l->block, "block")) return d->rc;
      l->shared_bytes = ty_str(d, items[i], "shared_bytes", 0);
    }
    if (!l->shared_bytes) l->shared_bytes = strdup("0");
    l->nargs = ty_strlist(d, ty_get(d, items[i], "args"), l->args, KA_MAX_ARGS, "args");
    if (l->nargs < 0) {
      l->nargs = 0;
      return d->rc;
    }
    for (int j = 0; j < l->nargs; j++)
      if (ka_task_param(t, l->args[j]) < 0 && ka_task_tensor(t, l->args[j]) < 0 &&
          !plan_is_scratch(p, l->args[j]))
        return ty_fail(d, items[i], "arg '%s' is not a tensor, param or scratch buffer",
                       l->args[j]);
  }
  return KA_OK;
}

int ka_plan_parse(const ka_task *t, const char *yaml, size_t len, ka_plan **out, char *err,
                  size_t errlen) {
  *out = NULL;
  if (len > 64 * 1024) return ka_seterr(err, errlen, KA_ETOOBIG, "launch plan over 64 KiB");
  ka_plan *p = calloc(1, sizeof *p);
  if (!p) return KA_ENOMEM;
  ty_doc d;
  int rc = ty_open(&d, t->launch_plan ? t->launch_plan : "launch plan", yaml, len, err, errlen);
  if (rc == KA_OK) {
    rc = plan_parse(&d, t, p);
    yaml_document_delete(&d.doc);
  }
  if (rc) {
    ka_plan_free(p);
    return rc;
  }
  *out = p;
  return KA_OK;
}

int ka_plan_from_entry(const ka_task *t, ka_plan **out, char *err, size_t errlen) {
  ka_plan *p = calloc(1, sizeof *p);
  if (!p || !t->entry_symbol) {
    free(p);
    return ka_seterr(err, errlen, KA_EINVAL, "task has no entry point");
  }
  p->kernels[p->nkernels++] = strdup(t->entry_symbol);
  ka_plan_launch *l = &p->launches[p->nlaunches++];
  l->kernel = strdup(t->entry_symbol);
  for (int j = 0; j < 3; j++) l->grid[j] = strdup("1"), l->block[j] = strdup("1");
  l->shared_bytes = strdup("0");
  for (int j = 0; j < t->nentry_args; j++) l->args[l->nargs++] = strdup(t->entry_args[j]);
  *out = p;
  return KA_OK;
}
