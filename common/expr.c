#include "expr.h"

#include <ctype.h>
#include <string.h>

#include "ka_common.h"

typedef struct {
  const char *s, *p;
  const ka_vars *vars;
  int depth;
  int rc;
  char *err;
  size_t errlen;
} ex_parser;

static int64_t ex_expr(ex_parser *ps);

static int64_t ex_fail(ex_parser *ps, int rc, const char *what) {
  if (ps->rc == KA_OK) {
    ps->rc = rc;
    ka_seterr(ps->err, ps->errlen, rc, "expression \"%s\": %s at offset %d", ps->s, what,
              (int)(ps->p - ps->s));
  }
  return 0;
}

static void ex_ws(ex_parser *ps) {
  while (*ps->p == ' ' || *ps->p == '\t') ps->p++;
}

int ka_vars_set(ka_vars *v, const char *name, int64_t value) {
  for (int i = 0; i < v->n; i++)
    if (!strcmp(v->names[i], name)) {
      v->values[i] = value;
      return KA_OK;
    }
  if (v->n >= KA_VARS_MAX) return KA_ERANGE;
  v->names[v->n] = name;
  v->values[v->n++] = value;
  return KA_OK;
}

int ka_vars_get(const ka_vars *v, const char *name, int64_t *value) {
  for (int i = 0; v && i < v->n; i++)
    if (!strcmp(v->names[i], name)) {
      *value = v->values[i];
      return 1;
    }
  return 0;
}

static int64_t ex_div(ex_parser *ps, int64_t a, int64_t b, int mod) {
  if (b == 0) return ex_fail(ps, KA_ERANGE, "division by zero");
  if (a == INT64_MIN && b == -1) return ex_fail(ps, KA_ERANGE, "overflow");
  return mod ? a % b : a / b;
}

static int64_t ex_call(ex_parser *ps, const char *name, size_t nlen, int64_t *a, int na) {
#define EX_IS(s) (nlen == strlen(s) && !strncmp(name, s, nlen))
  if (na != 2) return ex_fail(ps, KA_EPARSE, "functions take two arguments");
  if (EX_IS("min")) return a[0] < a[1] ? a[0] : a[1];
  if (EX_IS("max")) return a[0] > a[1] ? a[0] : a[1];
  if (EX_IS("ceil_div") || EX_IS("round_up")) {
    if (a[1] <= 0 || a[0] < 0) return ex_fail(ps, KA_ERANGE, "ceil_div needs a >= 0, b > 0");
    int64_t q = a[0] / a[1] + (a[0] % a[1] != 0);
    if (EX_IS("ceil_div")) return q;
    int64_t r;
    if (__builtin_mul_overflow(q, a[1], &r)) return ex_fail(ps, KA_ERANGE, "overflow");
    return r;
  }
#undef EX_IS
  return ex_fail(ps, KA_EPARSE, "unknown function");
}

static int64_t ex_primary(ex_parser *ps) {
  ex_ws(ps);
  if (++ps->depth > 32) return ex_fail(ps, KA_ERANGE, "nesting too deep");
  int64_t v = 0;
  if (*ps->p == '(') {
    ps->p++;
    v = ex_expr(ps);
    ex_ws(ps);
    if (*ps->p != ')') return ex_fail(ps, KA_EPARSE, "expected ')'");
    ps->p++;
  } else if (isdigit((unsigned char)*ps->p)) {
    while (isdigit((unsigned char)*ps->p)) {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *ps->p - '0', &v))
        return ex_fail(ps, KA_ERANGE, "integer too large");
      ps->p++;
    }
  } else if (isalpha((unsigned char)*ps->p) || *ps->p == '_') {
    const char *name = ps->p;
    while (isalnum((unsigned char)*ps->p) || *ps->p == '_') ps->p++;
    size_t nlen = (size_t)(ps->p - name);
    ex_ws(ps);
    if (*ps->p == '(') {
      ps->p++;
      int64_t args[4];
      int na = 0;
      for (;;) {
        if (na == 4) return ex_fail(ps, KA_EPARSE, "too many arguments");
        args[na++] = ex_expr(ps);
        if (ps->rc) return 0;
        ex_ws(ps);
        if (*ps->p == ',') {
          ps->p++;
          continue;
        }
        if (*ps->p == ')') {
          ps->p++;
          break;
        }
        return ex_fail(ps, KA_EPARSE, "expected ',' or ')'");
      }
      v = ex_call(ps, name, nlen, args, na);
    } else {
      char buf[64];
      if (nlen >= sizeof buf) return ex_fail(ps, KA_EPARSE, "name too long");
      memcpy(buf, name, nlen);
      buf[nlen] = 0;
      if (!ka_vars_get(ps->vars, buf, &v)) {
        ps->p = name;
        return ex_fail(ps, KA_EPARSE, "unknown name");
      }
    }
  } else {
    return ex_fail(ps, KA_EPARSE, "expected a number, name or '('");
  }
  ps->depth--;
  return v;
}

static int64_t ex_unary(ex_parser *ps) {
  ex_ws(ps);
  if (*ps->p == '-') {
    ps->p++;
    if (++ps->depth > 32) return ex_fail(ps, KA_ERANGE, "nesting too deep");
    int64_t v = ex_unary(ps);
    ps->depth--;
    if (v == INT64_MIN) return ex_fail(ps, KA_ERANGE, "overflow");
    return -v;
  }
  return ex_primary(ps);
}

static int64_t ex_term(ex_parser *ps) {
  int64_t v = ex_unary(ps);
  for (;;) {
    if (ps->rc) return 0;
    ex_ws(ps);
    char op = *ps->p;
    if (op != '*' && op != '/' && op != '%') return v;
    ps->p++;
    int64_t r = ex_unary(ps);
    if (ps->rc) return 0;
    if (op == '*') {
      if (__builtin_mul_overflow(v, r, &v)) return ex_fail(ps, KA_ERANGE, "overflow");
    } else {
      v = ex_div(ps, v, r, op == '%');
    }
  }
}

static int64_t ex_expr(ex_parser *ps) {
  int64_t v = ex_term(ps);
  for (;;) {
    if (ps->rc) return 0;
    ex_ws(ps);
    char op = *ps->p;
    if (op != '+' && op != '-') return v;
    ps->p++;
    int64_t r = ex_term(ps);
    if (ps->rc) return 0;
    int ovf = op == '+' ? __builtin_add_overflow(v, r, &v) : __builtin_sub_overflow(v, r, &v);
    if (ovf) return ex_fail(ps, KA_ERANGE, "overflow");
  }
}

int ka_expr_eval(const char *text, const ka_vars *vars, int64_t *out, char *err, size_t errlen) {
  if (!text || strlen(text) > KA_EXPR_MAX_LEN)
    return ka_seterr(err, errlen, KA_ERANGE, "expression missing or longer than %d bytes",
                     KA_EXPR_MAX_LEN);
  ex_parser ps = {.s = text, .p = text, .vars = vars, .err = err, .errlen = errlen};
  int64_t v = ex_expr(&ps);
  if (ps.rc) return ps.rc;
  ex_ws(&ps);
  if (*ps.p) {
    ex_fail(&ps, KA_EPARSE, "unexpected text");
    return ps.rc;
  }
  *out = v;
  return KA_OK;
}
