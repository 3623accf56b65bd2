/* libkaclient: a small C client of the kernelarena environment protocol.
 *
 * The messages are the protobuf-c types generated from proto/kernelarena.proto
 * (kernelarena.pb-c.h, installed beside this header); this library moves them over nng.
 * One ka_client holds one nng REQ socket; each call uses its own nng context, so many
 * calls may be in flight at once, from many threads (ka_client_call) or from one thread
 * (ka_client_start + ka_call_wait). The REQ resend timer is disabled: a resent Step would
 * be refused as a duplicate (docs/protocol.md).
 *
 * Every call has a deadline: timeout_ms bounds the wait and is sent as the request's
 * deadline_ms, so the server abandons a Step or Evaluate it cannot finish in time.
 *
 * Errors: functions return KA_OK or a negative KA_E* code (ka_common.h) with a message
 * in err (errlen bytes, may be NULL/0). A server-side Error (CAPACITY, NOT_FOUND, ...)
 * is not a call failure: it arrives as a response whose body_case is
 * KERNELARENA__V1__RESPONSE__BODY_ERROR (see ka_response_error).
 *
 * Thread safety: every function may be called concurrently on one client, except that
 * ka_client_close must not race with calls on the same client.
 * docs/client-c.md has a worked example. */
#ifndef KA_KACLIENT_H
#define KA_KACLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "kernelarena.pb-c.h"

typedef struct ka_client ka_client;

/* Connects to url (ipc://, tcp://, tls+tcp://). The dial is asynchronous: a server that
 * is not up yet is retried in the background, and calls wait for it up to their timeout.
 * tls+tcp://: the server's certificate is checked against $KA_TLS_CA and must name the
 * URL's host or $KA_TLS_SERVER_NAME; with $KA_TLS_CERT and $KA_TLS_KEY (PEM, key
 * unencrypted, both or neither) this client presents that certificate (docs/deploy.md).
 * Returns KA_OK, KA_EINVAL (bad URL; a TLS variable alone or a file that cannot be read,
 * named in err) or KA_ENOMEM. Caller owns *out. Reads the environment: not thread safe
 * against setenv. */
int ka_client_open(const char *url, ka_client **out, char *err, size_t errlen);

/* Like ka_client_open, then waits up to connect_timeout_ms for the server to answer a
 * Health request. Returns KA_OK, KA_EINVAL, KA_ENOMEM or KA_ETIMEDOUT (nothing is left
 * open on failure). */
int ka_client_open_timeout(const char *url, int connect_timeout_ms, ka_client **out, char *err,
                           size_t errlen);

/* Closes the socket; calls in flight fail with KA_EUNAVAIL. NULL is a no-op. */
void ka_client_close(ka_client *c);

/* Sends req and waits up to timeout_ms (<= 0: no limit) for the response. If
 * req->request_id is 0 a fresh id is assigned; req->deadline_ms is set to timeout_ms
 * when 0. On KA_OK the caller owns *resp (ka_client_free_response). Returns
 * KA_ETIMEDOUT, KA_EUNAVAIL (connection failed or closed), KA_EPARSE (undecodable
 * reply, or its request_id differs) or KA_EIO, with the reason in err.
 * A dead server fails fast: when the connection closes while the call waits for its
 * reply, it returns KA_EUNAVAIL at once (the request may or may not have been carried
 * out); a call started after the connection was lost waits at most 3 s for it to come
 * back before KA_EUNAVAIL. */
int ka_client_call(ka_client *c, Kernelarena__V1__Request *req, int timeout_ms,
                   Kernelarena__V1__Response **resp, char *err, size_t errlen);

/* ---- many requests in flight from one thread */

typedef struct ka_call ka_call;

/* Starts req on a context of its own and returns at once (req is encoded before the
 * return, so it may be freed then). Complete it with ka_call_wait. Returns KA_OK with
 * *out set, or KA_ENOMEM / KA_EIO. */
int ka_client_start(ka_client *c, Kernelarena__V1__Request *req, int timeout_ms, ka_call **out,
                    char *err, size_t errlen);
/* Waits for a started call and frees it; results as for ka_client_call. */
int ka_call_wait(ka_call *call, Kernelarena__V1__Response **resp, char *err, size_t errlen);

/* ---- one function per method (each sends one request and waits, as ka_client_call;
 * on KA_OK *resp holds the method's reply body or an Error) */

int ka_client_health(ka_client *c, int timeout_ms, Kernelarena__V1__Response **resp, char *err,
                     size_t errlen);
/* options: n_options key/value pairs (opt_keys[i] = opt_values[i]); has_seed 0 lets the
 * server draw the seed. */
int ka_client_reset(ka_client *c, const char *task_id, int has_seed, uint64_t seed,
                    const char *const *opt_keys, const char *const *opt_values, size_t n_options,
                    int timeout_ms, Kernelarena__V1__Response **resp, char *err, size_t errlen);
/* files: the changed editable files (paths and contents are not copied or freed). */
int ka_client_step(ka_client *c, const char *episode_id, int expected_step,
                   Kernelarena__V1__File *const *files, size_t n_files, int timeout_ms,
                   Kernelarena__V1__Response **resp, char *err, size_t errlen);
int ka_client_evaluate(ka_client *c, const Kernelarena__V1__EvaluateRequest *ev, int timeout_ms,
                       Kernelarena__V1__Response **resp, char *err, size_t errlen);
int ka_client_close_episode(ka_client *c, const char *episode_id, int timeout_ms,
                            Kernelarena__V1__Response **resp, char *err, size_t errlen);
int ka_client_state(ka_client *c, const char *episode_id, int timeout_ms,
                    Kernelarena__V1__Response **resp, char *err, size_t errlen);

void ka_client_free_response(Kernelarena__V1__Response *resp);

/* The Error of a response, or NULL if it holds a reply body. */
const Kernelarena__V1__Error *ka_response_error(const Kernelarena__V1__Response *resp);

/* Name of a Status value ("OK", "COMPILE_ERROR", ...) and of an ErrorCode. */
const char *ka_status_name(int status);
const char *ka_error_code_name(int code);

#endif
