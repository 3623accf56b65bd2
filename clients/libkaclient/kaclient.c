#include "kaclient.h"

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ka_common.h"

struct ka_client {
  nng_socket sock;
  atomic_ullong next_id;
};

int ka_client_open(const char *url, ka_client **out, char *err, size_t errlen) {
  *out = NULL;
  ka_client *c = calloc(1, sizeof *c);
  if (!c) return KA_ENOMEM;
  int rv = nng_req0_open(&c->sock);
  if (rv) {
    free(c);
    return ka_seterr(err, errlen, KA_ENOMEM, "nng_req0_open: %s", nng_strerror(rv));
  }
  nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
  nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, 256u << 20);
  nng_socket_set_ms(c->sock, NNG_OPT_RECONNMINT, 50);
  nng_socket_set_ms(c->sock, NNG_OPT_RECONNMAXT, 1000);
  rv = nng_dial(c->sock, url, NULL, NNG_FLAG_NONBLOCK);
  if (rv) {
    nng_close(c->sock);
    free(c);
    return ka_seterr(err, errlen, KA_EINVAL, "cannot dial %s: %s", url, nng_strerror(rv));
  }
  atomic_init(&c->next_id, (unsigned long long)ka_wall_s() << 20);
  *out = c;
  return KA_OK;
}

void ka_client_close(ka_client *c) {
  if (!c) return;
  nng_close(c->sock);
  free(c);
}

int ka_client_call(ka_client *c, Kernelarena__V1__Request *req, int timeout_ms,
                   Kernelarena__V1__Response **resp, char *err, size_t errlen) {
  *resp = NULL;
  if (!req->request_id) req->request_id = atomic_fetch_add(&c->next_id, 1) + 1;
  if (!req->deadline_ms && timeout_ms > 0) req->deadline_ms = (uint32_t)timeout_ms;
  nng_ctx ctx;
  int rv = nng_ctx_open(&ctx, c->sock);
  if (rv) return ka_seterr(err, errlen, KA_EIO, "nng_ctx_open: %s", nng_strerror(rv));
  nng_ctx_set_ms(ctx, NNG_OPT_RECVTIMEO, timeout_ms > 0 ? timeout_ms : NNG_DURATION_INFINITE);
  nng_ctx_set_ms(ctx, NNG_OPT_SENDTIMEO, timeout_ms > 0 ? timeout_ms : NNG_DURATION_INFINITE);
  size_t len = kernelarena__v1__request__get_packed_size(req);
  nng_msg *msg;
  if ((rv = nng_msg_alloc(&msg, len))) {
    nng_ctx_close(ctx);
    return ka_seterr(err, errlen, KA_ENOMEM, "nng_msg_alloc: %s", nng_strerror(rv));
  }
  kernelarena__v1__request__pack(req, nng_msg_body(msg));
  nng_aio *aio;
  if ((rv = nng_aio_alloc(&aio, NULL, NULL))) {
    nng_msg_free(msg);
    nng_ctx_close(ctx);
    return ka_seterr(err, errlen, KA_ENOMEM, "nng_aio_alloc: %s", nng_strerror(rv));
  }
  nng_aio_set_timeout(aio, timeout_ms > 0 ? timeout_ms : NNG_DURATION_INFINITE);
  nng_aio_set_msg(aio, msg);
  nng_ctx_send(ctx, aio);
  nng_aio_wait(aio);
  if ((rv = nng_aio_result(aio))) {
    nng_msg_free(nng_aio_get_msg(aio));
    nng_aio_free(aio);
    nng_ctx_close(ctx);
    return ka_seterr(err, errlen, rv == NNG_ETIMEDOUT ? KA_ETIMEDOUT : KA_EUNAVAIL,
                     "sending the request: %s", nng_strerror(rv));
  }
  nng_ctx_recv(ctx, aio);
  nng_aio_wait(aio);
  rv = nng_aio_result(aio);
  nng_msg *reply = rv ? NULL : nng_aio_get_msg(aio);
  nng_aio_free(aio);
  nng_ctx_close(ctx);
  if (rv)
    return ka_seterr(err, errlen, rv == NNG_ETIMEDOUT ? KA_ETIMEDOUT : KA_EIO,
                     "waiting for the response: %s", nng_strerror(rv));
  Kernelarena__V1__Response *r =
      kernelarena__v1__response__unpack(NULL, nng_msg_len(reply), nng_msg_body(reply));
  nng_msg_free(reply);
  if (!r) return ka_seterr(err, errlen, KA_EPARSE, "undecodable response");
  if (r->request_id != req->request_id && r->body_case != KERNELARENA__V1__RESPONSE__BODY_ERROR) {
    kernelarena__v1__response__free_unpacked(r, NULL);
    return ka_seterr(err, errlen, KA_EPARSE, "response to another request");
  }
  *resp = r;
  return KA_OK;
}

void ka_client_free_response(Kernelarena__V1__Response *resp) {
  if (resp) kernelarena__v1__response__free_unpacked(resp, NULL);
}

const char *ka_status_name(int status) {
  const ProtobufCEnumValue *v =
      protobuf_c_enum_descriptor_get_value(&kernelarena__v1__status__descriptor, status);
  return v ? v->name : "UNKNOWN";
}

const char *ka_error_code_name(int code) {
  const ProtobufCEnumValue *v =
      protobuf_c_enum_descriptor_get_value(&kernelarena__v1__error_code__descriptor, code);
  return v ? v->name : "UNKNOWN";
}
