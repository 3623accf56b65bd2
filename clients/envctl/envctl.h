/* envctl internals: the sub-commands of the command table (main.c), the options of
 * tasks / health / episode, the embedded server, and requests several commands share.
 * Nothing here is thread-safe unless stated. */
#ifndef KA_ENVCTL_H
#define KA_ENVCTL_H

#include <limits.h>
#include <stdio.h>
#include <sys/types.h>

#include "kaclient.h"

typedef struct ec_opts {
  const char *server;   /* NULL: embedded envserver + gpuexec */
  const char *tasks;    /* task folder */
  const char *backends; /* for the embedded gpuexec */
  const char *task;
  const char *agent; /* baseline | command:CMD | files:DIR */
  const char *workspace;
  int max_steps;
  int has_seed;
  unsigned long long seed;
  int timeout_s; /* per request */
  int agent_timeout_s;
  int verbose;
  char tasks_buf[PATH_MAX]; /* tasks may point here */
} ec_opts;

/* Sub-commands (main.c's table; one cmd_NAME.c each): argv[0] is the command's name (or
 * "envctl" where getopt's messages say so); each returns the exit code. */
int cmd_tasks(int argc, char **argv);
int cmd_episode(int argc, char **argv);
int cmd_health(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_step(int argc, char **argv);
int cmd_mcp(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_report(int argc, char **argv);

/* `envctl --help`'s text, to f (main.c). */
void ec_usage(FILE *f);
/* Exit codes a command returns to have main print envctl's usage: to stdout and exit 0
 * (EC_EXIT_HELP), or to stderr and exit 2 (EC_EXIT_USAGE). So the option parser calls
 * nothing of main.c, which calls every command (no call cycle). */
#define EC_EXIT_HELP 256
#define EC_EXIT_USAGE 257

/* Takes an option that every command with a server shares, by its getopt code: --server
 * ('s'), --tasks ('T'), --backends ('b'), --verbose ('v'), into o. Returns 1 when c was
 * one of them, else 0. */
int ec_opts_common(int c, const char *arg, ec_opts *o);
/* Their getopt_long entries, for a command's option table. */
// clang-format off
#define EC_OPTS_COMMON                                                                   \
  {"server", required_argument, 0, 's'}, {"tasks", required_argument, 0, 'T'},           \
  {"backends", required_argument, 0, 'b'}, {"verbose", no_argument, 0, 'v'}
// clang-format on

/* Closes episode id (Close; idempotent), waiting up to timeout_ms; a failure is
 * ignored (the server's idle TTL closes it then). */
void ec_close_episode(ka_client *c, const char *id, int timeout_ms);

/* Parses the options of tasks, health and episode (opts.c): --server, --tasks (the
 * default from ka_tasks_dir), --backends, --task, --agent, --max-steps, --seed,
 * --workspace, --timeout, --agent-timeout, --verbose, --help. Returns -1 when the
 * command goes on with *o filled, else the exit code: EC_EXIT_HELP after --help,
 * EC_EXIT_USAGE for an unknown option (main prints the usage), 2 for a bad value
 * (printed). */
int ec_opts_parse(int argc, char **argv, ec_opts *o);

/* Calls fn with a client of o->server, or of an envserver + gpuexec started for it (and
 * stopped after), with SIGINT and SIGTERM caught and SIGPIPE ignored. Returns fn's exit
 * code, or 1 when no server could be started or reached (printed). */
int ec_with_server(const ec_opts *o, int (*fn)(ka_client *, const ec_opts *));

/* An envserver and a gpuexec started for one envctl command. Without --verbose their
 * stderr goes to pipes whose tail envctl keeps (embedded.c), for the startup error. */
struct ec_tails;
typedef struct ec_embedded {
  char state[256];
  char url[320];
  pid_t server_pid, exec_pid;
  struct ec_tails *tails; /* the pipes' reader, or NULL (--verbose: stderr passed through) */
} ec_embedded;

/* Kills (SIGKILL, each one's process group) the embedded envserver and gpuexec running
 * now, if any. Async-signal-safe: for envctl's signal handler (opts.c). */
void ec_embedded_kill_all(void);

/* Starts envserver and gpuexec from the folder of the envctl executable on a fresh
 * private state folder, and waits until an executor has registered (up to 60 s).
 * Without o->verbose their stderr is read by a thread of envctl that keeps the last
 * 4 KiB of each (emb->tails, until ec_embedded_stop); with it, it is passed through.
 * Returns KA_OK with emb->url to dial, or an error with the reason in err: KA_EUNAVAIL
 * when one of them exited (err names it and, without --verbose, quotes its last
 * non-empty stderr line), KA_ETIMEDOUT when no executor registered, KA_ESYS. On error
 * both are stopped and the state folder removed. */
int ec_embedded_start(const ec_opts *o, ec_embedded *emb, char *err, size_t errlen);
/* Stops both processes, ends the stderr reader (emb->tails freed) and removes the
 * state folder unless keep is set. */
void ec_embedded_stop(ec_embedded *emb, int keep);

/* Sends one Health request to c within timeout_ms: KA_OK with the response in *out
 * (Health, or an Error: the caller checks body_case and frees it), else the transport's
 * error with the reason in err. */
int ec_health_call(ka_client *c, int timeout_ms, Kernelarena__V1__Response **out, char *err,
                   size_t errlen);

/* Prints an error response and returns 1. */
int ec_print_error(const char *what, const Kernelarena__V1__Response *r);

/* GetEpisode of episode id (without file contents when omit_files). Returns 0 with *out
 * (a GetEpisode response; caller frees with ka_client_free_response), or 1 with the
 * reason printed and *out NULL. */
int ec_get_episode(ka_client *c, const char *id, int omit_files, int timeout_ms,
                   Kernelarena__V1__Response **out);

/* Opens a client on url and waits for the server to answer Health, up to timeout_s
 * seconds but at most 10 s (a server that does not answer a Health request within 10 s
 * is not up), so that a wrong or dead --server fails at once with the address and a
 * hint instead of a request timing out later. Returns KA_OK with *out (caller closes),
 * else KA_ETIMEDOUT, KA_EINVAL (bad URL) or KA_ENOMEM with the reason in err; nothing is
 * left open then. */
int ec_server_open(const char *url, int timeout_s, ka_client **out, char *err, size_t errlen);

#endif
