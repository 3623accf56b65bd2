/* Client-side plumbing shared by the C protocol tests (server_protocol_test.c,
 * dispatch_test.c, triton_reset_test.c): a REQ socket dialled with retries, one protobuf
 * message sent, one Response received and decoded. A failure of this plumbing is no
 * assertion of the test: it prints the reason with the caller's file and line and exits
 * 1 (the test's atexit cleanup runs). Static functions for test programs only; one REQ
 * socket carries one request at a time (not thread safe per socket). */
#ifndef KA_NNG_TEST_H
#define KA_NNG_TEST_H

#include <stdio.h>
#include <stdlib.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>

#include "kernelarena.pb-c.h"

#define KA_NT_DIE(...)                              \
  do {                                              \
    fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                   \
    fputc('\n', stderr);                            \
    exit(1);                                        \
  } while (0)

/* A REQ socket dialled to url (retried for up to 10 s: the server may still be starting),
 * with the resend timer off (a resent Step would be evaluated twice) and 30 s send and
 * receive timeouts. */
static inline nng_socket ka_nt_open_req(const char *url) {
  nng_socket s;
  int rv = nng_req0_open(&s);
  if (rv) KA_NT_DIE("nng_req0_open: %s", nng_strerror(rv));
  nng_socket_set_ms(s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
  nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 30000);
  nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, 30000);
  for (int i = 0; i < 200; i++) {
    if ((rv = nng_dial(s, url, NULL, 0)) == 0) return s;
    nng_msleep(50);
  }
  KA_NT_DIE("cannot dial %s: %s", url, nng_strerror(rv));
}

/* Sends m, packed, on s. */
static inline void ka_nt_send_pb(nng_socket s, const ProtobufCMessage *m) {
  size_t n = protobuf_c_message_get_packed_size(m);
  nng_msg *msg;
  if (nng_msg_alloc(&msg, n) != 0) KA_NT_DIE("nng_msg_alloc");
  protobuf_c_message_pack(m, nng_msg_body(msg));
  int rv = nng_sendmsg(s, msg, 0);
  if (rv) KA_NT_DIE("send: %s", nng_strerror(rv));
}

/* The next Response on s, decoded (the caller frees it with
 * kernelarena__v1__response__free_unpacked). */
static inline Kernelarena__V1__Response *ka_nt_recv_resp(nng_socket s) {
  nng_msg *m;
  int rv = nng_recvmsg(s, &m, 0);
  if (rv) KA_NT_DIE("recv: %s", nng_strerror(rv));
  Kernelarena__V1__Response *r =
      kernelarena__v1__response__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
  nng_msg_free(m);
  if (!r) KA_NT_DIE("undecodable response");
  return r;
}

#endif
