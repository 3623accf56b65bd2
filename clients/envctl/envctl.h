/* envctl internals. */
#ifndef KA_ENVCTL_H
#define KA_ENVCTL_H

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
} ec_opts;

/* An envserver and a gpuexec started for one envctl command. */
typedef struct ec_embedded {
  char state[256];
  char url[320];
  pid_t server_pid, exec_pid;
} ec_embedded;

/* Starts envserver and gpuexec from the folder of the envctl executable on a fresh
 * private state folder, and waits until an executor has registered (up to 60 s).
 * Returns KA_OK with emb->url to dial, or an error with the reason in err. */
int ec_embedded_start(const ec_opts *o, ec_embedded *emb, char *err, size_t errlen);
/* Stops both processes and removes the state folder unless keep is set. */
void ec_embedded_stop(ec_embedded *emb, int keep);

/* `envctl episode`: returns the process exit code. */
int ec_episode(ka_client *c, const ec_opts *o);

/* `envctl validate ARGS...`: execs ka-validate beside envctl with argv (argv[0] is
 * replaced). Returns only on failure, with exit code 2. */
int ec_validate(int argc, char **argv);

/* Prints an error response and returns 1. */
int ec_print_error(const char *what, const Kernelarena__V1__Response *r);

#endif
