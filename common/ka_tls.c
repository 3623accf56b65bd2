/* Transport security of the nng endpoints (ka_tls.h). */
#include "ka_tls.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <nng/supplemental/tls/tls.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ka_common.h"

#define TLS_PEM_MAX ((size_t)1 << 20) /* a certificate, chain or key file, bytes */

static int tls_given(const char *path) {
  return path && *path;
}

int ka_url_is_tls(const char *url) {
  return url && !strncmp(url, "tls+tcp", 7) && strstr(url, "://") != NULL &&
         strstr(url, "://") - url <= 8;
}

int ka_url_host(const char *url, char *out, size_t outlen) {
  const char *p = url ? strstr(url, "://") : NULL;
  if (!p || !outlen) return KA_EINVAL;
  p += 3;
  const char *end;
  if (*p == '[') {
    p++;
    end = strchr(p, ']');
    if (!end) return KA_EINVAL;
  } else {
    end = p + strcspn(p, ":/");
  }
  size_t n = (size_t)(end - p);
  if (n >= outlen) return KA_EINVAL;
  memcpy(out, p, n);
  out[n] = 0;
  return KA_OK;
}

/* 1 if host names this machine's loopback interface: "localhost", an IPv4 address in
 * 127.0.0.0/8 or ::1 (a DNS name such as 127.example.com is not). */
static int tls_host_loopback(const char *host) {
  if (!strcasecmp(host, "localhost")) return 1;
  struct in_addr a4;
  struct in6_addr a6;
  if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

int ka_url_is_local(const char *url) {
  if (!url) return 0;
  static const char *const local[] = {"ipc://", "inproc://", "abstract://"};
  for (size_t i = 0; i < sizeof local / sizeof *local; i++)
    if (!strncmp(url, local[i], strlen(local[i]))) return 1;
  char host[256];
  if (ka_url_host(url, host, sizeof host) != KA_OK) return 0;
  return tls_host_loopback(host);
}

int ka_exec_url_check(const char *url, const ka_tls_files *f, int insecure, char *err,
                      size_t errlen) {
  if (ka_url_is_tls(url)) {
    if (!tls_given(f->cert) || !tls_given(f->key) || !tls_given(f->ca))
      return ka_seterr(err, errlen, KA_EINVAL,
                       "the executor endpoint %s is TLS: it needs --tls-cert, --tls-key and "
                       "--tls-ca (the CA that signed the executors' certificates)",
                       url);
    return KA_OK;
  }
  if (ka_url_is_local(url) || insecure) return KA_OK;
  return ka_seterr(err, errlen, KA_EINVAL,
                   "refusing the plain executor endpoint %s: it is reachable from other hosts "
                   "and does not authenticate executors (anyone reaching it could take jobs and "
                   "post results). Use tls+tcp:// with --tls-cert, --tls-key and --tls-ca, a "
                   "loopback address, ipc://, or pass --insecure-executors",
                   url);
}

/* Reads the PEM file of one flag into *out (caller frees). */
static int tls_read_pem(const char *path, const char *what, char **out, char *err, size_t errlen) {
  int rc = ka_read_file(path, TLS_PEM_MAX, out, NULL);
  if (rc != KA_OK)
    return ka_seterr(err, errlen, rc == KA_ENOENT ? KA_EINVAL : rc, "cannot read the %s %s: %s",
                     what, path, ka_strerror(rc));
  return KA_OK;
}

/* Loads own certificate and key (both paths given) into cfg. */
static int tls_own(nng_tls_config *cfg, const ka_tls_files *f, char *err, size_t errlen) {
  char *cert = NULL, *key = NULL;
  int rc = tls_read_pem(f->cert, "certificate", &cert, err, errlen);
  if (rc == KA_OK) rc = tls_read_pem(f->key, "key", &key, err, errlen);
  if (rc == KA_OK) {
    int rv = nng_tls_config_own_cert(cfg, cert, key, NULL);
    if (rv)
      rc = ka_seterr(err, errlen, KA_EINVAL,
                     "certificate %s with key %s: %s (PEM files of one pair, key unencrypted?)",
                     f->cert, f->key, nng_strerror(rv));
  }
  free(cert);
  if (key) {
    memset(key, 0, strlen(key)); /* no copy of the key left in freed memory */
    free(key);
  }
  return rc;
}

/* Loads the CA of f into cfg and makes the peer's certificate required. */
static int tls_ca(nng_tls_config *cfg, const ka_tls_files *f, char *err, size_t errlen) {
  char *ca = NULL;
  int rc = tls_read_pem(f->ca, "CA certificate", &ca, err, errlen);
  if (rc != KA_OK) return rc;
  int rv = nng_tls_config_ca_chain(cfg, ca, NULL);
  if (rv == 0) rv = nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_REQUIRED);
  free(ca);
  if (rv)
    return ka_seterr(err, errlen, KA_EINVAL, "CA certificate %s: %s", f->ca, nng_strerror(rv));
  return KA_OK;
}

int ka_tls_listener_setup(nng_listener l, const ka_tls_files *f, char *err, size_t errlen) {
  if (!tls_given(f->cert) || !tls_given(f->key))
    return ka_seterr(err, errlen, KA_EINVAL,
                     "a tls+tcp:// listener needs --tls-cert and --tls-key");
  nng_tls_config *cfg;
  int rv = nng_tls_config_alloc(&cfg, NNG_TLS_MODE_SERVER);
  if (rv) return ka_seterr(err, errlen, KA_EIO, "nng_tls_config_alloc: %s", nng_strerror(rv));
  int rc = tls_own(cfg, f, err, errlen);
  if (rc == KA_OK && tls_given(f->ca)) rc = tls_ca(cfg, f, err, errlen);
  if (rc == KA_OK && !tls_given(f->ca)) rv = nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_NONE);
  if (rc == KA_OK && rv == 0) rv = nng_listener_set_ptr(l, NNG_OPT_TLS_CONFIG, cfg);
  if (rc == KA_OK && rv) rc = ka_seterr(err, errlen, KA_EIO, "TLS listener: %s", nng_strerror(rv));
  nng_tls_config_free(cfg); /* the listener holds its own reference */
  return rc;
}

int ka_tls_dialer_setup(nng_dialer d, const char *url, const ka_tls_files *f,
                        const char *server_name, char *err, size_t errlen) {
  if (!tls_given(f->ca))
    return ka_seterr(err, errlen, KA_EINVAL,
                     "a tls+tcp:// server needs --tls-ca (the CA that signed its certificate)");
  if (tls_given(f->cert) != tls_given(f->key))
    return ka_seterr(err, errlen, KA_EINVAL, "--tls-cert and --tls-key go together");
  char host[256];
  if (!server_name || !*server_name) {
    if (ka_url_host(url, host, sizeof host) != KA_OK || !*host)
      return ka_seterr(err, errlen, KA_EINVAL, "no host in %s", url);
    server_name = host;
  }
  nng_tls_config *cfg;
  int rv = nng_tls_config_alloc(&cfg, NNG_TLS_MODE_CLIENT);
  if (rv) return ka_seterr(err, errlen, KA_EIO, "nng_tls_config_alloc: %s", nng_strerror(rv));
  int rc = tls_ca(cfg, f, err, errlen);
  if (rc == KA_OK && tls_given(f->cert)) rc = tls_own(cfg, f, err, errlen);
  if (rc == KA_OK) rv = nng_tls_config_server_name(cfg, server_name);
  if (rc == KA_OK && rv == 0) rv = nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, cfg);
  if (rc == KA_OK && rv) rc = ka_seterr(err, errlen, KA_EIO, "TLS dialer: %s", nng_strerror(rv));
  nng_tls_config_free(cfg);
  return rc;
}
