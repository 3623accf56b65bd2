/* Transport security of the nng endpoints (issue 20 item 1): which URLs are local,
 * which need TLS, and the nng TLS configurations (mbedtls, through nng's TLS
 * supplement) of envserver's listeners and gpuexec's dialer. docs/deploy.md says how to
 * make the certificates.
 *
 * The rule for an executor endpoint (ka_exec_url_check): ipc:// and inproc:// are local
 * (ipc is guarded by the socket file's mode); tls+tcp:// needs a certificate, its key and
 * a CA, and every executor must present a certificate that CA signed; a plain network
 * transport (tcp://, ws://) is allowed on a loopback address only, unless the operator
 * says --insecure-executors. */
#ifndef KA_TLS_H
#define KA_TLS_H

#include <nng/nng.h>
#include <stddef.h>

/* Paths of PEM files; NULL or "" where not given. */
typedef struct ka_tls_files {
  const char *cert; /* own certificate (or chain, leaf first) */
  const char *key;  /* its private key (unencrypted PEM) */
  const char *ca;   /* CA certificate(s) that signed the peer's certificate */
} ka_tls_files;

/* 1 if url's scheme is TLS over TCP (tls+tcp://, tls+tcp4://, tls+tcp6://), else 0. */
int ka_url_is_tls(const char *url);

/* 1 if url's transport never leaves this host: ipc://, inproc://, abstract://, or a
 * tcp-family or ws:// URL whose host is a loopback address (127.0.0.0/8, ::1,
 * "localhost"). 0 otherwise, including an empty host or a wildcard (0.0.0.0, *), which
 * listen on every interface. */
int ka_url_is_local(const char *url);

/* The host part of a tcp-family URL ("[::1]" loses its brackets) into out (at most
 * outlen bytes, NUL-terminated). Returns KA_OK, or KA_EINVAL when url has no "://" or
 * the host does not fit. */
int ka_url_host(const char *url, char *out, size_t outlen);

/* Checks an executor listener URL against the rule above. insecure: the operator's
 * --insecure-executors. Returns KA_OK, or KA_EINVAL with a message naming the flag that
 * is missing in err. */
int ka_exec_url_check(const char *url, const ka_tls_files *f, int insecure, char *err,
                      size_t errlen);

/* Sets the TLS configuration of listener l (a tls+tcp:// URL, not started yet): own
 * certificate and key from f (both required); with f->ca, peers must present a
 * certificate signed by it (the handshake fails otherwise, so the peer never gets a
 * pipe); without it peers are not asked for one. Returns KA_OK, or KA_EINVAL / KA_EIO
 * with nng's or mbedtls' reason in err. The listener holds the configuration. */
int ka_tls_listener_setup(nng_listener l, const ka_tls_files *f, char *err, size_t errlen);

/* Sets the TLS configuration of dialer d (a tls+tcp:// URL, not started): the server's
 * certificate must be signed by f->ca (required) and name server_name (NULL: the URL's
 * host); with f->cert and f->key (both or neither) this side presents them. Returns
 * KA_OK, or KA_EINVAL / KA_EIO with the reason in err. */
int ka_tls_dialer_setup(nng_dialer d, const char *url, const ka_tls_files *f,
                        const char *server_name, char *err, size_t errlen);

#endif
