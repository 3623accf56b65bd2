/* libkaclient: every call is one nng REQ context and one aio driven by a small state
 * machine (SEND -> RECV -> DONE), so any number of calls can be in flight; ka_call_wait
 * blocks on the call's condition variable.
 *
 * A dead server is noticed through nng pipe events: when the connection closes, every
 * call waiting for its reply is cancelled and fails at once with KA_EUNAVAIL (the
 * request may or may not have been carried out), and a call started while the
 * connection is down waits KC_RECONNECT_MS for it to come back, not its whole timeout. */
#include "kaclient.h"

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/tls/tls.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "ka_common.h" /* the KA_E* codes only: the library needs nothing else of it */

/* Writes the message into err (if given) and returns code, as ka_seterr does; kept
 * local so that libkaclient.a links with protobuf-c and nng alone. */
static int kc_seterr(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int kc_seterr(char *err, size_t errlen, int code, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return code;
}

/* Unix time in seconds (the start of request ids, so that ids of clients that restart
 * do not repeat). */
static double kc_wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define KC_RECONNECT_MS 3000

typedef struct ka_call ka_call;

struct ka_client {
  nng_socket sock;
  atomic_ullong next_id;
  pthread_mutex_t mtx; /* guards the fields below */
  int npipes;          /* open connections */
  int connected_once;  /* a connection was up at some time */
  unsigned removals;   /* connections closed so far */
  int healthy;         /* a connection is up and no call saw it reset since */
  ka_call *calls;      /* calls waiting for a reply (RECV) */
};

typedef enum { KC_SEND, KC_RECV, KC_DONE } kc_state;

struct ka_call {
  ka_client *client;
  ka_call *prev, *next; /* ka_client.calls while in RECV */
  int conn_lost;        /* cancelled because the connection closed */
  int reconnect_wait;   /* sent while disconnected: its send waits KC_RECONNECT_MS */
  unsigned removals_at_start;
  nng_ctx ctx;
  nng_aio *aio;
  uint64_t request_id;
  int timeout_ms;
  pthread_mutex_t mtx;
  pthread_cond_t cv;
  kc_state state;
  int rv;             /* nng result of the failed step, 0 if none */
  kc_state failed_in; /* the step that failed */
  nng_msg *reply;
};

/* nng pipe event (an nng thread): counts connections; when one closes, cancels every
 * call waiting for a reply (nng would otherwise hold it until the timeout, or resend it
 * to a restarted server). */
static void kc_pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg) {
  (void)p;
  ka_client *c = arg;
  pthread_mutex_lock(&c->mtx);
  if (ev == NNG_PIPE_EV_ADD_POST) {
    c->npipes++;
    c->connected_once = 1;
    c->healthy = 1;
  } else if (ev == NNG_PIPE_EV_REM_POST) {
    if (c->npipes > 0) c->npipes--;
    c->removals++;
    c->healthy = 0;
    for (ka_call *k = c->calls; k; k = k->next) {
      k->conn_lost = 1;
      nng_aio_cancel(k->aio);
    }
  }
  pthread_mutex_unlock(&c->mtx);
}

/* Links k into c->calls (it waits for its reply), unless a connection closed since the
 * call started and none is up: then returns 0 and k is marked lost. */
static int kc_track(ka_call *k) {
  ka_client *c = k->client;
  pthread_mutex_lock(&c->mtx);
  int up = c->npipes > 0 || c->removals == k->removals_at_start;
  if (up) {
    k->prev = NULL;
    k->next = c->calls;
    if (c->calls) c->calls->prev = k;
    c->calls = k;
  } else {
    k->conn_lost = 1;
  }
  pthread_mutex_unlock(&c->mtx);
  return up;
}

static void kc_untrack(ka_call *k) {
  ka_client *c = k->client;
  pthread_mutex_lock(&c->mtx);
  if (k->prev || c->calls == k) {
    if (k->prev)
      k->prev->next = k->next;
    else
      c->calls = k->next;
    if (k->next) k->next->prev = k->prev;
  }
  k->prev = k->next = NULL;
  pthread_mutex_unlock(&c->mtx);
}

/* The text of the PEM file path into a malloc'd, NUL-terminated *out (at most 1 MiB).
 * 0, or -1 (errno: the file cannot be read, or is larger). */
static int kc_read_pem(const char *path, char **out) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  size_t cap = 1u << 20, n = 0;
  char *buf = malloc(cap + 1);
  if (buf) n = fread(buf, 1, cap + 1, f);
  int e = !buf ? ENOMEM : ferror(f) ? EIO : n > cap ? EFBIG : 0;
  fclose(f);
  if (e) {
    free(buf);
    errno = e;
    return -1;
  }
  buf[n] = 0;
  *out = buf;
  return 0;
}

/* Presents this client's certificate $KA_TLS_CERT with its key $KA_TLS_KEY (unencrypted
 * PEM; both or neither) on dialer d, for a server whose client endpoint asks for one
 * (envserver --tls-client-ca). 0 when neither is set or both are loaded; else an
 * nng error with the reason in err. */
static int kc_own_cert(nng_dialer d, char *err, size_t errlen) {
  const char *cert = getenv("KA_TLS_CERT"), *key = getenv("KA_TLS_KEY");
  int have_cert = cert && *cert, have_key = key && *key;
  if (!have_cert && !have_key) return 0;
  if (have_cert != have_key) {
    kc_seterr(err, errlen, KA_EINVAL, "KA_TLS_CERT and KA_TLS_KEY go together (%s is not set)",
              have_cert ? "KA_TLS_KEY" : "KA_TLS_CERT");
    return NNG_EINVAL;
  }
  char *cpem = NULL, *kpem = NULL;
  if (kc_read_pem(cert, &cpem) || kc_read_pem(key, &kpem)) {
    kc_seterr(err, errlen, KA_EINVAL, "cannot read %s: %s", cpem ? key : cert, strerror(errno));
    free(cpem);
    return NNG_EINVAL;
  }
  nng_tls_config *cfg = NULL;
  int rv = nng_dialer_get_ptr(d, NNG_OPT_TLS_CONFIG, (void **)&cfg);
  if (rv == 0) rv = nng_tls_config_own_cert(cfg, cpem, kpem, NULL);
  if (rv)
    kc_seterr(err, errlen, KA_EINVAL, "certificate %s with key %s: %s (one pair, key unencrypted?)",
              cert, key, nng_strerror(rv));
  free(cpem);
  explicit_bzero(kpem, strlen(kpem)); /* no copy of the key left in freed memory */
  free(kpem);
  return rv;
}

/* Dials url without waiting for the connection. A tls+tcp:// server's certificate is
 * checked against the CA file $KA_TLS_CA (nng's default without it: the system has
 * none, so the handshake fails) and must name the URL's host, or $KA_TLS_SERVER_NAME
 * when set; with $KA_TLS_CERT and $KA_TLS_KEY this client presents that certificate
 * (docs/deploy.md). Returns nng's error (err says why when it is ours). */
static int kc_dial(nng_socket sock, const char *url, char *err, size_t errlen) {
  nng_dialer d;
  int rv = nng_dialer_create(&d, sock, url);
  int tls = !strncmp(url, "tls+tcp", 7);
  const char *ca = getenv("KA_TLS_CA"), *name = getenv("KA_TLS_SERVER_NAME");
  if (rv == 0 && tls && ca && *ca) rv = nng_dialer_set_string(d, NNG_OPT_TLS_CA_FILE, ca);
  if (rv == 0 && tls && name && *name) rv = nng_dialer_set_string(d, NNG_OPT_TLS_SERVER_NAME, name);
  if (rv == 0 && tls) rv = kc_own_cert(d, err, errlen);
  if (rv == 0) rv = nng_dialer_start(d, NNG_FLAG_NONBLOCK);
  return rv;
}

int ka_client_open(const char *url, ka_client **out, char *err, size_t errlen) {
  *out = NULL;
  if (!url || (strncmp(url, "ipc://", 6) && strncmp(url, "tcp://", 6) &&
               strncmp(url, "tls+tcp://", 10) && strncmp(url, "inproc://", 9)))
    return kc_seterr(err, errlen, KA_EINVAL,
                     "'%s' is not a server URL: it needs ipc://PATH or tcp://HOST:PORT",
                     url ? url : "(none)");
  ka_client *c = calloc(1, sizeof *c);
  if (!c) return KA_ENOMEM;
  pthread_mutex_init(&c->mtx, NULL);
  int rv = nng_req0_open(&c->sock);
  if (rv) {
    pthread_mutex_destroy(&c->mtx);
    free(c);
    return kc_seterr(err, errlen, KA_ENOMEM, "nng_req0_open: %s", nng_strerror(rv));
  }
  nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
  nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, 256u << 20);
  nng_socket_set_ms(c->sock, NNG_OPT_RECONNMINT, 50);
  nng_socket_set_ms(c->sock, NNG_OPT_RECONNMAXT, 1000);
  nng_pipe_notify(c->sock, NNG_PIPE_EV_ADD_POST, kc_pipe_cb, c);
  nng_pipe_notify(c->sock, NNG_PIPE_EV_REM_POST, kc_pipe_cb, c);
  char why[512] = "";
  rv = kc_dial(c->sock, url, why, sizeof why);
  if (rv) {
    nng_close(c->sock);
    pthread_mutex_destroy(&c->mtx);
    free(c);
    return kc_seterr(err, errlen, KA_EINVAL, "cannot dial %s: %s", url,
                     why[0] ? why : nng_strerror(rv));
  }
  atomic_init(&c->next_id, (unsigned long long)kc_wall_s() << 20);
  *out = c;
  return KA_OK;
}

int ka_client_open_timeout(const char *url, int connect_timeout_ms, ka_client **out, char *err,
                           size_t errlen) {
  int rc = ka_client_open(url, out, err, errlen);
  if (rc) return rc;
  Kernelarena__V1__Response *r = NULL;
  rc = ka_client_health(*out, connect_timeout_ms, &r, err, errlen);
  ka_client_free_response(r);
  if (rc) {
    ka_client_close(*out);
    *out = NULL;
    return kc_seterr(err, errlen, KA_ETIMEDOUT, "no answer from %s within %d ms", url,
                     connect_timeout_ms);
  }
  return KA_OK;
}

void ka_client_close(ka_client *c) {
  if (!c) return;
  nng_close(c->sock);
  pthread_mutex_destroy(&c->mtx);
  free(c);
}

static void kc_cb(void *arg) {
  ka_call *k = arg;
  int rv = nng_aio_result(k->aio);
  pthread_mutex_lock(&k->mtx);
  if (k->state == KC_SEND && rv == 0) {
    k->state = KC_RECV;
    pthread_mutex_unlock(&k->mtx);
    if (kc_track(k)) {
      nng_ctx_recv(k->ctx, k->aio);
      return;
    }
    /* the connection closed as the request left: its reply will not come */
    pthread_mutex_lock(&k->mtx);
    rv = NNG_ECONNRESET;
  }
  if (k->state == KC_RECV) {
    pthread_mutex_unlock(&k->mtx);
    kc_untrack(k);
    pthread_mutex_lock(&k->mtx);
  }
  if (rv == NNG_ECONNRESET || rv == NNG_ECLOSED) {
    /* nng saw the connection go (perhaps before its pipe event): later calls must not
     * wait their whole timeout for it */
    pthread_mutex_lock(&k->client->mtx);
    k->client->healthy = 0;
    pthread_mutex_unlock(&k->client->mtx);
    k->conn_lost = k->conn_lost || rv == NNG_ECONNRESET;
  }
  if (rv) {
    if (k->state == KC_SEND) nng_msg_free(nng_aio_get_msg(k->aio));
    k->rv = rv;
    k->failed_in = k->state;
  } else {
    k->reply = nng_aio_get_msg(k->aio);
  }
  k->state = KC_DONE;
  pthread_cond_signal(&k->cv);
  pthread_mutex_unlock(&k->mtx);
}

static void kc_free(ka_call *k) {
  if (!k) return;
  if (k->aio) nng_aio_free(k->aio); /* stops the aio first */
  kc_untrack(k);
  nng_ctx_close(k->ctx);
  if (k->reply) nng_msg_free(k->reply);
  pthread_mutex_destroy(&k->mtx);
  pthread_cond_destroy(&k->cv);
  free(k);
}

int ka_client_start(ka_client *c, Kernelarena__V1__Request *req, int timeout_ms, ka_call **out,
                    char *err, size_t errlen) {
  *out = NULL;
  if (!req->request_id) req->request_id = atomic_fetch_add(&c->next_id, 1) + 1;
  if (!req->deadline_ms && timeout_ms > 0) req->deadline_ms = (uint32_t)timeout_ms;
  ka_call *k = calloc(1, sizeof *k);
  if (!k) return kc_seterr(err, errlen, KA_ENOMEM, "out of memory");
  pthread_mutex_init(&k->mtx, NULL);
  pthread_cond_init(&k->cv, NULL);
  k->request_id = req->request_id;
  k->timeout_ms = timeout_ms;
  k->client = c;
  int rv = nng_ctx_open(&k->ctx, c->sock);
  if (rv) {
    pthread_mutex_destroy(&k->mtx);
    pthread_cond_destroy(&k->cv);
    free(k);
    return kc_seterr(err, errlen, KA_EIO, "nng_ctx_open: %s", nng_strerror(rv));
  }
  if ((rv = nng_aio_alloc(&k->aio, kc_cb, k))) {
    k->aio = NULL;
    kc_free(k);
    return kc_seterr(err, errlen, KA_ENOMEM, "nng_aio_alloc: %s", nng_strerror(rv));
  }
  size_t len = kernelarena__v1__request__get_packed_size(req);
  nng_msg *msg;
  if ((rv = nng_msg_alloc(&msg, len))) {
    kc_free(k);
    return kc_seterr(err, errlen, KA_ENOMEM, "nng_msg_alloc: %s", nng_strerror(rv));
  }
  kernelarena__v1__request__pack(req, nng_msg_body(msg));
  /* One timeout for the send and the receive together would need a timer; each
   * operation gets the whole timeout, and the server's deadline_ms bounds the wait. */
  nng_aio_set_timeout(k->aio, timeout_ms > 0 ? timeout_ms : NNG_DURATION_INFINITE);
  /* The server was reachable and the connection is down: it has KC_RECONNECT_MS to come
   * back, rather than the whole timeout. */
  pthread_mutex_lock(&c->mtx);
  int down = c->connected_once && (c->npipes == 0 || !c->healthy);
  k->removals_at_start = c->removals;
  pthread_mutex_unlock(&c->mtx);
  if (down && (timeout_ms <= 0 || timeout_ms > KC_RECONNECT_MS)) {
    nng_aio_set_timeout(k->aio, KC_RECONNECT_MS);
    k->reconnect_wait = 1;
  }
  k->state = KC_SEND;
  nng_aio_set_msg(k->aio, msg);
  nng_ctx_send(k->ctx, k->aio);
  *out = k;
  return KA_OK;
}

int ka_call_wait(ka_call *k, Kernelarena__V1__Response **resp, char *err, size_t errlen) {
  *resp = NULL;
  pthread_mutex_lock(&k->mtx);
  while (k->state != KC_DONE) pthread_cond_wait(&k->cv, &k->mtx);
  pthread_mutex_unlock(&k->mtx);
  int rc = KA_OK;
  if (k->rv && k->conn_lost) {
    rc = kc_seterr(err, errlen, KA_EUNAVAIL,
                   "the connection to the server closed while waiting for the reply (the server "
                   "stopped or restarted); the request may or may not have been carried out");
  } else if (k->rv && k->failed_in == KC_SEND && k->reconnect_wait && k->rv == NNG_ETIMEDOUT) {
    rc = kc_seterr(err, errlen, KA_EUNAVAIL,
                   "the connection to the server was lost and did not come back within %d ms",
                   KC_RECONNECT_MS);
  } else if (k->rv) {
    int to = k->rv == NNG_ETIMEDOUT;
    rc =
        kc_seterr(err, errlen, to ? KA_ETIMEDOUT : (k->failed_in == KC_SEND ? KA_EUNAVAIL : KA_EIO),
                  "%s the request: %s", k->failed_in == KC_SEND ? "sending" : "waiting for",
                  nng_strerror(k->rv));
    if (k->rv == NNG_ECLOSED) rc = KA_EUNAVAIL;
  } else {
    Kernelarena__V1__Response *r =
        kernelarena__v1__response__unpack(NULL, nng_msg_len(k->reply), nng_msg_body(k->reply));
    if (!r) {
      rc = kc_seterr(err, errlen, KA_EPARSE, "undecodable response");
    } else if (r->request_id != k->request_id &&
               r->body_case != KERNELARENA__V1__RESPONSE__BODY_ERROR) {
      kernelarena__v1__response__free_unpacked(r, NULL);
      rc = kc_seterr(err, errlen, KA_EPARSE, "response to another request");
    } else {
      *resp = r;
    }
  }
  kc_free(k);
  return rc;
}

int ka_client_call(ka_client *c, Kernelarena__V1__Request *req, int timeout_ms,
                   Kernelarena__V1__Response **resp, char *err, size_t errlen) {
  *resp = NULL;
  ka_call *k;
  int rc = ka_client_start(c, req, timeout_ms, &k, err, errlen);
  return rc ? rc : ka_call_wait(k, resp, err, errlen);
}

/* ---- one function per method */

int ka_client_health(ka_client *c, int timeout_ms, Kernelarena__V1__Response **resp, char *err,
                     size_t errlen) {
  Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__HealthRequest h = KERNELARENA__V1__HEALTH_REQUEST__INIT;
  req.body_case = KERNELARENA__V1__REQUEST__BODY_HEALTH;
  req.health = &h;
  return ka_client_call(c, &req, timeout_ms, resp, err, errlen);
}

int ka_client_reset(ka_client *c, const char *task_id, int has_seed, uint64_t seed,
                    const char *const *opt_keys, const char *const *opt_values, size_t n_options,
                    int timeout_ms, Kernelarena__V1__Response **resp, char *err, size_t errlen) {
  Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__ResetRequest rr = KERNELARENA__V1__RESET_REQUEST__INIT;
  Kernelarena__V1__ResetRequest__OptionsEntry *ov = NULL, **op = NULL;
  if (n_options) {
    ov = calloc(n_options, sizeof *ov);
    op = calloc(n_options, sizeof *op);
    if (!ov || !op) {
      free(ov);
      free(op);
      return kc_seterr(err, errlen, KA_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n_options; i++) {
      kernelarena__v1__reset_request__options_entry__init(&ov[i]);
      ov[i].key = (char *)opt_keys[i];
      ov[i].value = (char *)opt_values[i];
      op[i] = &ov[i];
    }
  }
  rr.task_id = (char *)task_id;
  rr.has_seed = has_seed != 0;
  rr.seed = seed;
  rr.n_options = n_options;
  rr.options = op;
  req.body_case = KERNELARENA__V1__REQUEST__BODY_RESET;
  req.reset = &rr;
  int rc = ka_client_call(c, &req, timeout_ms, resp, err, errlen);
  free(ov);
  free(op);
  return rc;
}

int ka_client_step(ka_client *c, const char *episode_id, int expected_step,
                   Kernelarena__V1__File *const *files, size_t n_files, int timeout_ms,
                   Kernelarena__V1__Response **resp, char *err, size_t errlen) {
  Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__StepRequest sr = KERNELARENA__V1__STEP_REQUEST__INIT;
  sr.episode_id = (char *)episode_id;
  sr.expected_step = expected_step;
  sr.n_files = n_files;
  sr.files = (Kernelarena__V1__File **)files;
  req.body_case = KERNELARENA__V1__REQUEST__BODY_STEP;
  req.step = &sr;
  return ka_client_call(c, &req, timeout_ms, resp, err, errlen);
}

int ka_client_evaluate(ka_client *c, const Kernelarena__V1__EvaluateRequest *ev, int timeout_ms,
                       Kernelarena__V1__Response **resp, char *err, size_t errlen) {
  Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
  req.body_case = KERNELARENA__V1__REQUEST__BODY_EVALUATE;
  req.evaluate = (Kernelarena__V1__EvaluateRequest *)ev;
  return ka_client_call(c, &req, timeout_ms, resp, err, errlen);
}

int ka_client_close_episode(ka_client *c, const char *episode_id, int timeout_ms,
                            Kernelarena__V1__Response **resp, char *err, size_t errlen) {
  Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__CloseRequest cr = KERNELARENA__V1__CLOSE_REQUEST__INIT;
  cr.episode_id = (char *)episode_id;
  req.body_case = KERNELARENA__V1__REQUEST__BODY_CLOSE;
  req.close = &cr;
  return ka_client_call(c, &req, timeout_ms, resp, err, errlen);
}

int ka_client_state(ka_client *c, const char *episode_id, int timeout_ms,
                    Kernelarena__V1__Response **resp, char *err, size_t errlen) {
  Kernelarena__V1__Request req = KERNELARENA__V1__REQUEST__INIT;
  Kernelarena__V1__StateRequest sr = KERNELARENA__V1__STATE_REQUEST__INIT;
  sr.episode_id = (char *)episode_id;
  req.body_case = KERNELARENA__V1__REQUEST__BODY_STATE;
  req.state = &sr;
  return ka_client_call(c, &req, timeout_ms, resp, err, errlen);
}

void ka_client_free_response(Kernelarena__V1__Response *resp) {
  if (resp) kernelarena__v1__response__free_unpacked(resp, NULL);
}

const Kernelarena__V1__Error *ka_response_error(const Kernelarena__V1__Response *resp) {
  return resp && resp->body_case == KERNELARENA__V1__RESPONSE__BODY_ERROR ? resp->error : NULL;
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
