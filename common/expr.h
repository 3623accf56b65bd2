/* Integer expressions of launch plans and task shapes, e.g. "ceil_div(n, 4 * 256)".
 *
 * Why our own: launch plans need exact 64-bit integer semantics (ceil_div, floor
 * division, overflow detection) over untrusted text with bounded cost; the expression
 * libraries Debian ships (libmatheval, muparser) evaluate in floating point.
 *
 * Grammar: expr := term (('+'|'-') term)* ; term := unary (('*'|'/'|'%') unary)* ;
 * unary := '-' unary | primary ; primary := integer | name | name '(' expr {',' expr} ')'
 * | '(' expr ')'. Functions: ceil_div(a,b), round_up(a,b), min(a,b), max(a,b).
 * '/' and '%' truncate toward zero like C. Names resolve through a ka_vars table. */
#ifndef KA_EXPR_H
#define KA_EXPR_H

#include <stddef.h>
#include <stdint.h>

#define KA_EXPR_MAX_LEN 512
#define KA_VARS_MAX 48

typedef struct ka_vars {
  int n;
  const char *names[KA_VARS_MAX]; /* borrowed; must outlive the table */
  int64_t values[KA_VARS_MAX];
} ka_vars;

/* Adds or replaces name -> value. Returns KA_OK or KA_ERANGE when full. */
int ka_vars_set(ka_vars *v, const char *name, int64_t value);

/* Looks a name up; returns 1 and stores the value if found, else 0. */
int ka_vars_get(const ka_vars *v, const char *name, int64_t *value);

/* Evaluates text. Returns KA_OK and *out, or KA_EPARSE (syntax, unknown name or
 * function), KA_ERANGE (overflow, division by zero, text longer than
 * KA_EXPR_MAX_LEN or nesting deeper than 32) with a message in err. */
int ka_expr_eval(const char *text, const ka_vars *vars, int64_t *out, char *err, size_t errlen);

#endif
