/* libkaclient: a small C client of the kernelarena environment protocol.
 *
 * The messages are the protobuf-c types generated from proto/kernelarena.proto
 * (kernelarena.pb-c.h); this library moves them over nng. One ka_client holds one
 * nng REQ socket; each call uses its own nng context, so many calls may be in flight
 * from many threads at once. The REQ resend timer is disabled: a resent Step would
 * evaluate a kernel twice.
 * Thread safety: ka_client_call may be called concurrently; open/close may not race
 * with calls. */
#ifndef KA_KACLIENT_H
#define KA_KACLIENT_H

#include <stddef.h>

#include "kernelarena.pb-c.h"

typedef struct ka_client ka_client;

/* Connects to url (ipc://, tcp://). The dial is asynchronous: a server that is not up
 * yet is retried in the background, and calls wait for it up to their timeout.
 * Returns KA_OK, KA_EINVAL (bad URL) or KA_ENOMEM. Caller owns *out. */
int ka_client_open(const char *url, ka_client **out, char *err, size_t errlen);

/* Closes the socket; calls in flight fail. NULL is a no-op. */
void ka_client_close(ka_client *c);

/* Sends req and waits up to timeout_ms (<= 0: no limit) for the response. If
 * req->request_id is 0 a fresh id is assigned; req->deadline_ms is set to timeout_ms
 * when 0. On KA_OK the caller owns *resp (ka_client_free_response); a server-side
 * Error arrives as a response whose body is error. Returns KA_ETIMEDOUT, KA_EUNAVAIL
 * (connection failed), KA_EPARSE (undecodable reply, or its request_id differs) or
 * KA_EIO, with the reason in err. */
int ka_client_call(ka_client *c, Kernelarena__V1__Request *req, int timeout_ms,
                   Kernelarena__V1__Response **resp, char *err, size_t errlen);

void ka_client_free_response(Kernelarena__V1__Response *resp);

/* Name of a Status value ("OK", "COMPILE_ERROR", ...) and of an ErrorCode. */
const char *ka_status_name(int status);
const char *ka_error_code_name(int code);

#endif
