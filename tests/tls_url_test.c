/* Unit tests of common/ka_tls.c: which URLs are local, which are TLS, the executor
 * endpoint rule (ka_exec_url_check) and the TLS configurations' argument checks. The
 * handshakes themselves are tests/tls_test.sh's. */
#include <stdio.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "ka_check.h"
#include "ka_common.h"
#include "ka_tls.h"

static void test_local(void) {
  static const struct {
    const char *url;
    int local;
  } cases[] = {
      {"ipc:///tmp/x.ipc", 1},
      {"inproc://a", 1},
      {"tcp://127.0.0.1:5555", 1},
      {"tcp://127.8.9.10:1", 1},
      {"tcp://localhost:5555", 1},
      {"tcp://[::1]:5555", 1},
      {"ws://localhost:80/x", 1},
      {"tls+tcp://127.0.0.1:1", 1},
      {"tcp://0.0.0.0:5555", 0},
      {"tcp://*:5555", 0},
      {"tcp://:5555", 0},
      {"tcp://10.0.0.1:5555", 0},
      {"tcp://127.example.com:5555", 0},
      {"tcp://[::]:5555", 0},
      {"tcp6://[2001:db8::1]:1", 0},
      {"nonsense", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    int got = ka_url_is_local(cases[i].url);
    check(got == cases[i].local, "ka_url_is_local", "%s -> %d", cases[i].url, got);
  }
  check(ka_url_is_tls("tls+tcp://h:1") && ka_url_is_tls("tls+tcp6://[::1]:1") &&
            !ka_url_is_tls("tcp://h:1") && !ka_url_is_tls("ipc://tls+tcp"),
        "ka_url_is_tls", "tls+tcp, tls+tcp6 yes; tcp and an ipc path naming it no");
  char host[64];
  check(ka_url_host("tls+tcp://[::1]:7", host, sizeof host) == KA_OK && !strcmp(host, "::1"),
        "ka_url_host", "brackets dropped: %s", host);
  check(ka_url_host("tcp://h", host, 1) == KA_EINVAL, "ka_url_host", "a host too long: EINVAL");
}

static void test_exec_rule(void) {
  ka_tls_files none = {0}, all = {"c.pem", "k.pem", "ca.pem"}, noca = {"c.pem", "k.pem", NULL};
  char err[512] = "";
  int rc = ka_exec_url_check("tcp://0.0.0.0:1", &none, 0, err, sizeof err);
  check(rc == KA_EINVAL && strstr(err, "--insecure-executors"), "exec rule",
        "plain tcp on 0.0.0.0 refused, naming the flag: %s", err);
  check(ka_exec_url_check("tcp://0.0.0.0:1", &none, 1, err, sizeof err) == KA_OK, "exec rule",
        "--insecure-executors allows it");
  check(ka_exec_url_check("tcp://127.0.0.1:1", &none, 0, err, sizeof err) == KA_OK &&
            ka_exec_url_check("ipc:///tmp/e.ipc", &none, 0, err, sizeof err) == KA_OK,
        "exec rule", "loopback tcp and ipc allowed");
  err[0] = 0;
  rc = ka_exec_url_check("tls+tcp://0.0.0.0:1", &noca, 0, err, sizeof err);
  check(rc == KA_EINVAL && strstr(err, "--tls-ca"), "exec rule", "tls without a CA: %s", err);
  check(ka_exec_url_check("tls+tcp://0.0.0.0:1", &all, 0, err, sizeof err) == KA_OK, "exec rule",
        "tls with certificate, key and CA allowed");
}

static void test_setup_args(void) {
  nng_socket s;
  nng_dialer d;
  nng_listener l;
  char err[512] = "";
  ka_tls_files none = {0}, half = {"/nonexistent.crt", NULL, "/nonexistent-ca.crt"};
  int ok = nng_req0_open(&s) == 0 && nng_dialer_create(&d, s, "tls+tcp://127.0.0.1:9") == 0;
  check(ok &&
            ka_tls_dialer_setup(d, "tls+tcp://127.0.0.1:9", &none, NULL, err, sizeof err) ==
                KA_EINVAL &&
            strstr(err, "--tls-ca"),
        "dialer setup", "no CA: %s", err);
  check(ok &&
            ka_tls_dialer_setup(d, "tls+tcp://127.0.0.1:9", &half, NULL, err, sizeof err) ==
                KA_EINVAL &&
            strstr(err, "together"),
        "dialer setup", "a certificate without its key: %s", err);
  ka_tls_files missing_ca = {NULL, NULL, "/nonexistent-ca.crt"};
  check(ok &&
            ka_tls_dialer_setup(d, "tls+tcp://127.0.0.1:9", &missing_ca, NULL, err, sizeof err) ==
                KA_EINVAL &&
            strstr(err, "/nonexistent-ca.crt"),
        "dialer setup", "a CA file that is not there is named: %s", err);
  nng_close(s);
  ok = nng_rep0_open(&s) == 0 && nng_listener_create(&l, s, "tls+tcp://127.0.0.1:9") == 0;
  check(ok && ka_tls_listener_setup(l, &none, err, sizeof err) == KA_EINVAL &&
            strstr(err, "--tls-cert"),
        "listener setup", "no certificate: %s", err);
  nng_close(s);
}

int main(void) {
  test_local();
  test_exec_rule();
  test_setup_args();
  printf("%d passed, %d failed\n", ka_check_pass, ka_check_fail);
  return ka_check_fail ? 1 : 0;
}
