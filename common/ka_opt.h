/* Command-line option values: strict parsing with range checks, and the defaults that
 * several programs share, in one place. Used by every main of the project (envctl and
 * its sub-commands, envserver, gpuexec, ka-validate).
 *
 * Each parser takes the whole string (no trailing characters, no empty value), checks
 * the range, and on a bad value prints one line to stderr naming the program, the
 * option, the range and the value, e.g.
 *   envserver: --contexts needs an integer from 1 to 4096, not 'x'
 * and returns KA_EINVAL with *out unchanged. Thread-safe (no state). */
#ifndef KA_OPT_H
#define KA_OPT_H

#include <stddef.h>
#include <stdint.h>

/* Per-request timeout of clients (envctl --timeout), seconds. */
#define KA_OPT_REQUEST_TIMEOUT_S 900
/* Per-request timeout of `envctl export`, seconds (reads only). */
#define KA_OPT_EXPORT_TIMEOUT_S 60
/* How long envctl waits for an envserver given by --server to answer at all before it
 * says that none does (a server still starting up has this long). */
#define KA_OPT_CONNECT_TIMEOUT_S 10
/* Per-run limit of a command agent of `envctl episode` (--agent-timeout), seconds. */
#define KA_OPT_EPISODE_AGENT_TIMEOUT_S 600
/* Largest timeout any option accepts, seconds (11.6 days; in ms it still fits an int). */
#define KA_OPT_MAX_TIMEOUT_S 1000000

/* A base-10 integer from lo to hi (lo <= hi, both within int). prog and opt name the
 * program and the option (without "--") in the message. */
int ka_opt_int(const char *prog, const char *opt, const char *v, long lo, long hi, int *out);

/* An unsigned 64-bit integer (decimal, 0x hex or 0 octal, as strtoull with base 0; no
 * sign), e.g. a seed. */
int ka_opt_u64(const char *prog, const char *opt, const char *v, uint64_t *out);

/* A finite number from lo to hi (strtod syntax). */
int ka_opt_double(const char *prog, const char *opt, const char *v, double lo, double hi,
                  double *out);

/* A fraction in (0, 1] (e.g. --failure-speedup); the message says "needs a number in
 * (0, 1]". */
int ka_opt_fraction(const char *prog, const char *opt, const char *v, double *out);

/* A timeout in whole seconds from 1 to KA_OPT_MAX_TIMEOUT_S. */
int ka_opt_timeout_s(const char *prog, const char *opt, const char *v, int *out);

/* The path of helper program or module `name` (ka-runner, ka_backend_cuda.so) of the
 * running executable: beside it (a build folder), else in
 * <executable's folder>/../libexec/kernelarena (an installed tree, `cmake --install`),
 * else the first (which then fails to start with that name). Written into buf, which
 * is returned. Thread-safe. */
const char *ka_helper_path(const char *name, char *buf, size_t len);

/* The task folder of a program: given when non-NULL; else ./tasks when it is a
 * folder; else <executable's folder>/../share/kernelarena/tasks (an installed tree);
 * else the source tree's tasks/ (its path compiled in as KA_SOURCE_TASKS_DIR),
 * when that is a folder; else <executable's folder>/../../tasks when that is one (a
 * build folder inside a moved source tree); else "tasks" (which then fails to open with
 * that name). The result is given, a string literal, or buf. Thread-safe. */
const char *ka_tasks_dir(const char *given, char *buf, size_t len);

#endif
