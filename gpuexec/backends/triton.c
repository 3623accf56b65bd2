/* The Triton compile path: triton.h. */
#include "triton.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ka_common.h"
#include "sandbox.h"
#include "triton_bundle.h"

#define TR_LOG_KEEP ((size_t)64 << 10) /* bytes of the driver's output kept */
#define TR_TAIL_LINES 30               /* lines of a failure shown as feedback */
#define TR_MAX_CUBIN ((size_t)64 << 20)

/* ---- compile units */

typedef struct tr_unit {
  const ka_plan_launch *l; /* the first launch of this unit */
  char types[KA_MAX_ARGS][16];
  int ntypes;
} tr_unit;

static const char *tr_dtype(ka_dtype dt) {
  switch (dt) {
    case KA_DT_F32:
      return "fp32";
    case KA_DT_F64:
      return "fp64";
    case KA_DT_F16:
      return "fp16";
    case KA_DT_BF16:
      return "bf16";
    case KA_DT_I8:
      return "i8";
    case KA_DT_U8:
      return "u8";
    case KA_DT_I32:
      return "i32";
    case KA_DT_I64:
      return "i64";
  }
  return "i8";
}

int ka_triton_arg_type(const ka_task *t, const ka_plan *plan, const char *name, char *out,
                       size_t outlen) {
  int i = ka_task_tensor(t, name);
  if (i >= 0) return snprintf(out, outlen, "*%s", tr_dtype(t->tensors[i].dtype)) > 0 ? 0 : -1;
  i = ka_task_param(t, name);
  if (i >= 0) return snprintf(out, outlen, "%s", t->params[i].is_i32 ? "i32" : "i64") > 0 ? 0 : -1;
  for (int s = 0; s < plan->nscratch; s++)
    if (!strcmp(plan->scratch[s].name, name))
      return snprintf(out, outlen, "*%s", tr_dtype(plan->scratch[s].dtype)) > 0 ? 0 : -1;
  return -1;
}

/* 1 if launches a and b (with arg types ta, tb) compile to the same unit. */
static int tr_same(const ka_plan_launch *a, const tr_unit *ua, const ka_plan_launch *b,
                   const tr_unit *ub) {
  if (strcmp(a->kernel, b->kernel) || a->num_warps != b->num_warps ||
      a->num_stages != b->num_stages || a->nconstexprs != b->nconstexprs ||
      ua->ntypes != ub->ntypes)
    return 0;
  for (int i = 0; i < ua->ntypes; i++)
    if (strcmp(ua->types[i], ub->types[i])) return 0;
  for (int i = 0; i < a->nconstexprs; i++)
    if (strcmp(a->constexpr_names[i], b->constexpr_names[i]) ||
        strcmp(a->constexpr_values[i], b->constexpr_values[i]))
      return 0;
  return 1;
}

/* The units of plan into units[0..*n), unit_of[i] the unit of launch i. */
static int tr_units(const ka_task *t, const ka_plan *plan, tr_unit *units, int *n, int *unit_of,
                    char *err, size_t errlen) {
  *n = 0;
  for (int i = 0; i < plan->nlaunches; i++) {
    const ka_plan_launch *l = &plan->launches[i];
    tr_unit u = {.l = l, .ntypes = l->nargs};
    for (int a = 0; a < l->nargs; a++)
      if (ka_triton_arg_type(t, plan, l->args[a], u.types[a], sizeof u.types[a]))
        return ka_seterr(err, errlen, KA_ECOMPILE, "launch %d: unknown arg '%s'", i + 1,
                         l->args[a]);
    int k = 0;
    while (k < *n && !tr_same(units[k].l, &units[k], l, &u)) k++;
    if (k == *n) {
      if (*n == KA_TRITON_MAX_UNITS)
        return ka_seterr(err, errlen, KA_ECOMPILE, "more than %d distinct kernel compiles",
                         KA_TRITON_MAX_UNITS);
      units[(*n)++] = u;
    }
    unit_of[i] = k;
  }
  return KA_OK;
}

/* The driver's request (JSON; names are identifiers, values literals: ka_plan_parse checked). */
static void tr_request(const char *source, int arch, const tr_unit *units, int n, ka_sb *sb) {
  ka_sb_printf(sb, "{\"source\": \"%s\", \"arch\": %d, \"units\": [", source, arch);
  for (int k = 0; k < n; k++) {
    const ka_plan_launch *l = units[k].l;
    ka_sb_printf(sb, "%s\n {\"id\": \"u%d\", \"kernel\": \"%s\", \"args\": [", k ? "," : "", k,
                 l->kernel);
    for (int a = 0; a < units[k].ntypes; a++)
      ka_sb_printf(sb, "%s\"%s\"", a ? ", " : "", units[k].types[a]);
    ka_sb_puts(sb, "], \"constexprs\": {");
    for (int c = 0; c < l->nconstexprs; c++)
      ka_sb_printf(sb, "%s\"%s\": %s", c ? ", " : "", l->constexpr_names[c],
                   l->constexpr_values[c]);
    ka_sb_printf(sb, "}, \"num_warps\": %d, \"num_stages\": %d}", l->num_warps, l->num_stages);
  }
  ka_sb_puts(sb, "]}\n");
}

/* ---- the driver process */

/* The driver script's path into out: KA_TRITON_DRIVER, else beside ka-runner. */
static int tr_driver_path(char *out, size_t outlen) {
  const char *d = getenv("KA_TRITON_DRIVER");
  if (d && *d) return snprintf(out, outlen, "%s", d) < (int)outlen ? KA_OK : KA_ERANGE;
  char dir[PATH_MAX];
  if (ka_exe_dir(dir, sizeof dir) != KA_OK) return KA_ESYS;
  return snprintf(out, outlen, "%s/%s", dir, KA_TRITON_DRIVER_NAME) < (int)outlen ? KA_OK
                                                                                  : KA_ERANGE;
}

/* Closes every descriptor from lo up (close_range(2), else one by one). */
static void tr_close_from(int lo) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, (unsigned)lo, ~0U, 0) == 0) return;
#endif
  long max = sysconf(_SC_OPEN_MAX);
  for (long fd = lo; fd < (max > 0 ? max : 65536); fd++) close((int)fd);
}

/* Runs `python driver request.json out` in workdir, sandboxed (ka_sandbox_compiler: the
 * C compiler's sandbox), with an environment of its own, output into *log (at most
 * TR_LOG_KEEP kept); its process group is killed when it ends, and at timeout_s.
 * Returns KA_OK (exit 0), KA_ECOMPILE (any other end: the submission's Python runs in
 * there, so its exit status is not ours to read), KA_ETIMEDOUT, and only for what
 * happened before the driver started (told on a close-on-exec status pipe, which the
 * driver never holds): KA_EUNAVAIL (the Python is missing) or KA_ESYS (the sandbox). */
static int tr_run(const char *python, const char *driver, const char *workdir, double timeout_s,
                  char **log) {
  int pfd[2], sfd[2];
  if (pipe2(pfd, O_CLOEXEC) != 0) return KA_ESYS;
  if (pipe2(sfd, O_CLOEXEC) != 0) {
    close(pfd[0]), close(pfd[1]);
    return KA_ESYS;
  }
  char e_home[PATH_MAX + 8], e_tmp[PATH_MAX + 8], e_cache[PATH_MAX + 24], e_th[PATH_MAX + 16];
  snprintf(e_home, sizeof e_home, "HOME=%s", workdir);
  snprintf(e_tmp, sizeof e_tmp, "TMPDIR=%s", workdir);
  snprintf(e_cache, sizeof e_cache, "TRITON_CACHE_DIR=%s/.triton", workdir);
  snprintf(e_th, sizeof e_th, "TRITON_HOME=%s", workdir);
  /* triton from where the probe found it (KA_TRITON_SITE), nothing of any user's */
  char e_path[PATH_MAX + 16] = "PYTHONNOUSERSITE=1";
  const char *site = getenv("KA_TRITON_SITE");
  if (site && site[0] == '/') snprintf(e_path, sizeof e_path, "PYTHONPATH=%s", site);
  /* the task folders (KA_TRITON_DENY, ka_triton_build): never opened by the driver, so a
   * hidden baseline (instruction2triton) cannot reach a compile log through it */
  char e_deny[PATH_MAX + 24] = "KA_TRITON_DENY=";
  const char *deny = getenv("KA_TRITON_DENY");
  if (deny && deny[0] == '/') snprintf(e_deny, sizeof e_deny, "KA_TRITON_DENY=%s", deny);
  char *envp[] = {e_home,
                  e_tmp,
                  e_cache,
                  e_th,
                  "PATH=/usr/bin:/bin",
                  "LANG=C.UTF-8",
                  "PYTHONDONTWRITEBYTECODE=1",
                  "PYTHONNOUSERSITE=1",
                  "PYTHONHASHSEED=0",
                  e_path,
                  e_deny,
                  NULL};
  char *argv[] = {(char *)python, "-s", (char *)driver, "request.json", "out", NULL};
  pid_t pid = fork();
  if (pid < 0) {
    close(pfd[0]), close(pfd[1]), close(sfd[0]), close(sfd[1]);
    return KA_ESYS;
  }
  if (pid == 0) {
    setpgid(0, 0);
    dup2(pfd[1], 1);
    dup2(pfd[1], 2);
    /* the status pipe as fd 3, close-on-exec: what it says comes from here, never from
     * the driver */
    if (sfd[1] == 3 ? fcntl(3, F_SETFD, FD_CLOEXEC) != 0 : dup3(sfd[1], 3, O_CLOEXEC) != 3)
      _exit(126);
    /* submitted Python runs in here at compile time (definitions, constexpr evaluation):
     * none of the runner's descriptors (the result channel, tensor memfds, the device
     * lock) may reach it */
    tr_close_from(4);
    if (chdir(workdir) != 0) {
      (void)!write(3, "S", 1);
      _exit(126);
    }
    char err[256];
    if (ka_sandbox_compiler(workdir, err, sizeof err) != KA_OK) {
      dprintf(2, "[kernelarena] sandbox of the triton compiler: %s\n", err);
      (void)!write(3, "S", 1);
      _exit(125);
    }
    execve(python, argv, envp);
    dprintf(2, "[kernelarena] cannot run %s: %s\n", python, strerror(errno));
    (void)!write(3, "E", 1);
    _exit(127);
  }
  close(pfd[1]);
  close(sfd[1]);
  ka_sb sb = {0};
  double deadline = ka_now_s() + timeout_s;
  int timed_out = ka_sb_read_until(&sb, pfd[0], deadline, TR_LOG_KEEP);
  close(pfd[0]);
  if (timed_out) kill(-pid, SIGKILL);
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  /* whatever the driver left in its group (ptxas; a process of the submission's Python
   * that outlived it, which would run on through the timed calls) dies now: wait until
   * it is gone, so that the supervisor does not count it as left behind */
  kill(-pid, SIGKILL);
  for (int i = 0; i < 2000 && kill(-pid, 0) == 0; i++) usleep(1000);
  char why = 0;
  ssize_t sn;
  while ((sn = read(sfd[0], &why, 1)) < 0 && errno == EINTR) {
  }
  close(sfd[0]);
  *log = ka_sb_take(&sb);
  if (sn == 1 && why == 'E') return KA_EUNAVAIL;
  if (sn == 1) return KA_ESYS;
  if (timed_out) return KA_ETIMEDOUT;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? KA_OK : KA_ECOMPILE;
}

/* The last TR_TAIL_LINES lines of text into sb, and its last non-empty line into err. */
static void tr_tail(const char *text, ka_sb *sb, char *err, size_t errlen) {
  size_t n = text ? strlen(text) : 0;
  while (n && (text[n - 1] == '\n' || text[n - 1] == ' ')) n--;
  size_t start = n;
  int lines = 0;
  while (start > 0 && lines < TR_TAIL_LINES)
    if (text[--start] == '\n') lines++;
  if (start > 0 || (n && text[0] == '\n')) start++;
  if (n) ka_sb_append(sb, text + start, n - start);
  ka_sb_puts(sb, "\n");
  size_t last = n;
  while (last > 0 && text[last - 1] != '\n') last--;
  if (n > last) ka_seterr(err, errlen, KA_ECOMPILE, "%.*s", (int)(n - last), text + last);
}

/* ---- the bundle */

static void tr_put(ka_sb *sb, const void *p, size_t n) {
  ka_sb_append(sb, p, n);
}

static void tr_put_str(ka_sb *sb, const char *s) {
  uint32_t n = (uint32_t)strlen(s);
  tr_put(sb, &n, 4);
  tr_put(sb, s, n);
}

/* Reads workdir/out/meta.txt and the cubins into a bundle (sb). KA_OK or KA_ECOMPILE
 * (a unit Triton could not give us, or files the driver should have written are missing:
 * the submission's Python ran in it, so that is its compile's failure) with err. */
static int tr_bundle(const char *workdir, const tr_unit *units, int n, ka_sb *sb, char *err,
                     size_t errlen) {
  char p[PATH_MAX], *meta = NULL;
  size_t mlen = 0;
  snprintf(p, sizeof p, "%s/out/meta.txt", workdir);
  if (ka_read_file_nofollow(p, 1 << 20, &meta, &mlen) != KA_OK)
    return ka_seterr(err, errlen, KA_ECOMPILE, "the triton driver wrote no meta.txt");
  uint32_t ver = 1, cnt = (uint32_t)n;
  tr_put(sb, KA_TRITON_MAGIC, 8);
  tr_put(sb, &ver, 4);
  tr_put(sb, &cnt, 4);
  int rc = KA_OK;
  for (int k = 0; k < n && rc == KA_OK; k++) {
    char want[16], sym[KA_TRITON_NAME_MAX];
    snprintf(want, sizeof want, "\nunit u%d ", k);
    const char *line = strstr(meta, want);
    unsigned shared, warps, ctas, align, coop, pdl;
    unsigned long long scratch, prof;
    if (!line || sscanf(line + strlen(want),
                        "name %127s shared %u warps %u ctas %u scratch %llu %u profile %llu coop "
                        "%u pdl %u",
                        sym, &shared, &warps, &ctas, &scratch, &align, &prof, &coop, &pdl) != 9) {
      rc = ka_seterr(err, errlen, KA_ECOMPILE, "meta.txt lacks unit u%d", k);
      break;
    }
    if (ctas != 1 || coop || pdl || prof)
      rc = ka_seterr(err, errlen, KA_ECOMPILE,
                     "kernel %s compiled for a launch the runner does not make (num_ctas %u, "
                     "cooperative %u, PDL %u, profile scratch %llu bytes)",
                     units[k].l->kernel, ctas, coop, pdl, prof);
    char *cubin = NULL;
    size_t clen = 0;
    snprintf(p, sizeof p, "%s/out/u%d.cubin", workdir, k);
    if (rc == KA_OK &&
        (ka_read_file_nofollow(p, TR_MAX_CUBIN, &cubin, &clen) != KA_OK || clen == 0))
      rc = ka_seterr(err, errlen, KA_ECOMPILE, "the triton driver wrote no cubin for unit u%d", k);
    if (rc == KA_OK) {
      char name[KA_TRITON_NAME_MAX];
      snprintf(name, sizeof name, "%.100s__ka%d", units[k].l->kernel, k);
      uint64_t sb64 = scratch, c64 = clen;
      uint32_t sh = shared, w = warps, al = align;
      tr_put_str(sb, name);
      tr_put_str(sb, sym);
      tr_put(sb, &sh, 4);
      tr_put(sb, &w, 4);
      tr_put(sb, &sb64, 8);
      tr_put(sb, &al, 4);
      tr_put(sb, &c64, 8);
      tr_put(sb, cubin, clen);
    }
    free(cubin);
  }
  free(meta);
  if (rc == KA_OK && sb->oom) rc = ka_seterr(err, errlen, KA_ENOMEM, "out of memory");
  return rc;
}

/* ---- the cache */

/* The cache key (hex SHA-256) into key, or "" when there is no cache (no folder or no
 * triton version known). */
static void tr_cache_key(const char *request, const ka_source *src, const char *arch,
                         const char *driver, char key[65]) {
  key[0] = '\0';
  const char *dir = getenv("KA_TRITON_CACHE"), *ver = getenv("KA_TRITON_VERSION");
  if (!dir || !*dir || !ver || !*ver) return;
  char *dtext = NULL;
  size_t dlen = 0;
  if (ka_read_file(driver, 1 << 20, &dtext, &dlen) != KA_OK) return;
  char dhash[65];
  ka_sha256_hex(dtext, dlen, dhash);
  free(dtext);
  ka_sb sb = {0};
  /* the role (KA_TRITON_ROLE, the runner's: baseline or candidate): a candidate never
   * hits a baseline's entry, so neither its log nor its build time says whether its
   * files are a hidden baseline's (instruction2triton; red team 2026-12-01) */
  const char *role = getenv("KA_TRITON_ROLE");
  ka_sb_printf(&sb, "kernelarena triton cache 2\ntriton %s\narch %s\ndriver %s\nrole %s\n", ver,
               arch, dhash, role ? role : "");
  ka_sb_puts(&sb, request);
  ka_sb_printf(&sb, "source %zu\n", src->len);
  ka_sb_append(&sb, src->text, src->len);
  if (!sb.oom) ka_sha256_hex(sb.s, sb.len, key);
  ka_sb_free(&sb);
}

static int tr_cache_get(const char *key, void **bundle, size_t *len) {
  if (!key[0]) return -1;
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/%s.bundle", getenv("KA_TRITON_CACHE"), key);
  char *b = NULL;
  size_t n = 0;
  ka_triton_unit u[KA_TRITON_MAX_UNITS];
  int cnt;
  if (ka_read_file(p, (size_t)KA_TRITON_MAX_UNITS * TR_MAX_CUBIN, &b, &n) != KA_OK) return -1;
  if (ka_triton_bundle_parse(b, n, u, &cnt)) {
    free(b);
    return -1;
  }
  *bundle = b;
  *len = n;
  return 0;
}

/* Stores the bundle under key (a temporary file renamed into place: readers never see
 * half of one). Best effort. */
/* A bundle above this is not cached (a submission's units could be made huge; the disk
 * the cache is on is every evaluation's: red team 2026-12-01). */
#define TR_CACHE_MAX_BUNDLE ((size_t)8 << 20)

static void tr_cache_put(const char *key, const void *bundle, size_t len) {
  if (!key[0] || len > TR_CACHE_MAX_BUNDLE) return;
  const char *dir = getenv("KA_TRITON_CACHE");
  char tmp[PATH_MAX], p[PATH_MAX];
  ka_mkdirs(dir);
  snprintf(tmp, sizeof tmp, "%s/.%s.%d.tmp", dir, key, (int)getpid());
  snprintf(p, sizeof p, "%s/%s.bundle", dir, key);
  if (ka_write_file(tmp, bundle, len) == KA_OK && rename(tmp, p) != 0) unlink(tmp);
}

/* ---- the build */

static int tr_arch(const char *arch) {
  int v = 0;
  if (!arch || sscanf(arch, "sm_%d", &v) != 1 || v < 50 || v > 999) return -1;
  return v;
}

/* Writes the source and the request into workdir and runs the driver: the compile proper
 * (below the cache). */
static int tr_compile(const ka_source *src, const char *request, const char *python,
                      const char *driver, const char *workdir, double timeout_s,
                      const tr_unit *units, int n, ka_sb *out, ka_sb *lg, char *err,
                      size_t errlen) {
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/%s", workdir, src->name);
  if (ka_write_file(p, src->text, src->len) != KA_OK)
    return ka_seterr(err, errlen, KA_EIO, "cannot write %s", p);
  snprintf(p, sizeof p, "%s/request.json", workdir);
  if (ka_write_file(p, request, strlen(request)) != KA_OK)
    return ka_seterr(err, errlen, KA_EIO, "cannot write %s", p);
  snprintf(p, sizeof p, "%s/out", workdir);
  if (ka_mkdirs(p) != KA_OK) return ka_seterr(err, errlen, KA_EIO, "cannot make %s", p);
  char *dlog = NULL;
  int rc = tr_run(python, driver, workdir, timeout_s, &dlog);
  if (rc == KA_OK) {
    rc = tr_bundle(workdir, units, n, out, err, errlen);
  } else if (rc == KA_ETIMEDOUT) {
    ka_sb_printf(lg,
                 "[kernelarena] the triton compile did not finish within its deadline (%.0f s) "
                 "and was killed\n",
                 timeout_s);
    rc = ka_seterr(err, errlen, KA_ECOMPILE,
                   "the triton compile did not finish within its deadline (%.0f s)", timeout_s);
  } else if (rc == KA_ECOMPILE) {
    ka_sb_printf(lg, "triton compile of %s failed (the driver's last lines):\n", src->name);
    ka_seterr(err, errlen, KA_ECOMPILE, "triton compile failed");
    tr_tail(dlog, lg, err, errlen);
  } else if (rc == KA_EUNAVAIL) {
    rc = ka_seterr(err, errlen, KA_EUNAVAIL, "cannot run the triton Python %s: %s", python,
                   dlog ? dlog : "");
  } else {
    rc = ka_seterr(err, errlen, KA_ESYS, "the triton compiler's sandbox failed: %s",
                   dlog ? dlog : "");
  }
  free(dlog);
  return rc;
}

/* Names the folder of every task (t's folder less its id: the registry's root) in
 * KA_TRITON_DENY for the compile driver, which refuses to open anything under it
 * (triton_compile.py: submitted Python runs there and could read a hidden baseline, as
 * instruction2triton's, into its error; review 2026-12-01). The whole folder when the id
 * is not its tail. */
static void tr_deny_tasks(const ka_task *t) {
  char root[PATH_MAX];
  char real[PATH_MAX];
  if (!t || !t->dir || !realpath(t->dir, real)) return;
  snprintf(root, sizeof root, "%s", real);
  size_t rl = strlen(root), il = t->id ? strlen(t->id) : 0;
  if (il && rl > il + 1 && !strcmp(root + rl - il, t->id) && root[rl - il - 1] == '/')
    root[rl - il - 1] = '\0';
  setenv("KA_TRITON_DENY", root, 1);
}

int ka_triton_build(const ka_task *t, const ka_plan *plan, const ka_source *src, const char *arch,
                    const char *workdir, double timeout_s, void **bundle, size_t *len, int *cached,
                    char **log, char *err, size_t errlen) {
  *bundle = NULL;
  *len = 0;
  *cached = 0;
  if (log) *log = NULL;
  const char *python = getenv("KA_TRITON_PYTHON");
  char driver[PATH_MAX];
  int sm = tr_arch(arch);
  if (!python || python[0] != '/')
    return ka_seterr(err, errlen, KA_EUNAVAIL,
                     "no Python with triton for language triton (gpuexec --triton-python; "
                     "KA_TRITON_PYTHON must be an absolute path, not '%s')",
                     python ? python : "");
  if (tr_driver_path(driver, sizeof driver) != KA_OK || access(driver, R_OK) != 0)
    return ka_seterr(err, errlen, KA_EUNAVAIL, "the triton compile driver %s is missing", driver);
  if (sm < 0)
    return ka_seterr(err, errlen, KA_EINVAL, "triton: bad architecture '%s'", arch ? arch : "");
  if (!ka_path_is_safe(src->name) || strchr(src->name, '/') || strchr(src->name, '"'))
    return ka_seterr(err, errlen, KA_EINVAL, "bad source name %s", src->name);
  tr_deny_tasks(t);
  tr_unit units[KA_TRITON_MAX_UNITS];
  int unit_of[KA_MAX_LAUNCHES], n = 0;
  int rc = tr_units(t, plan, units, &n, unit_of, err, errlen);
  ka_sb req = {0}, lg = {0}, out = {0};
  if (rc == KA_OK) tr_request(src->name, sm, units, n, &req);
  char key[65] = "";
  if (rc == KA_OK && !req.oom) tr_cache_key(req.s, src, arch, driver, key);
  if (rc == KA_OK && tr_cache_get(key, bundle, len) == 0) {
    *cached = 1;
    ka_sb_printf(&lg, "note: %s loaded from the triton compile cache (%.16s)\n", src->name, key);
  } else if (rc == KA_OK) {
    double t0 = ka_now_s();
    rc = tr_compile(src, req.s, python, driver, workdir, timeout_s, units, n, &out, &lg, err,
                    errlen);
    if (rc == KA_OK) {
      ka_sb_printf(&lg, "note: %s: %d kernel compile(s) by triton in %.2f s\n", src->name, n,
                   ka_now_s() - t0);
      tr_cache_put(key, out.s, out.len);
      *len = out.len;
      *bundle = ka_sb_take(&out);
    }
  }
  ka_sb_free(&req);
  ka_sb_free(&out);
  if (log)
    *log = ka_sb_take(&lg);
  else
    ka_sb_free(&lg);
  return rc;
}

/* ---- the plan */

#define TR_SCRATCH "__ka_triton_scratch"

int ka_triton_plan_apply(const ka_task *t, ka_plan *plan, const void *bundle, size_t len, char *err,
                         size_t errlen) {
  ka_triton_unit u[KA_TRITON_MAX_UNITS];
  tr_unit units[KA_TRITON_MAX_UNITS];
  int n = 0, nu = 0, unit_of[KA_MAX_LAUNCHES];
  if (ka_triton_bundle_parse(bundle, len, u, &n))
    return ka_seterr(err, errlen, KA_EINVAL, "not a triton image");
  int rc = tr_units(t, plan, units, &nu, unit_of, err, errlen);
  if (rc) return rc;
  if (nu != n) return ka_seterr(err, errlen, KA_EINVAL, "the triton image does not match the plan");
  if (plan->nscratch == KA_MAX_SCRATCH)
    return ka_seterr(err, errlen, KA_ECOMPILE,
                     "a triton plan may name at most %d scratch buffers (one is Triton's)",
                     KA_MAX_SCRATCH - 1);
  /* the scratch buffer's bytes: 1, or the largest need, as nested two-argument max() */
  ka_sb count = {0};
  ka_sb_puts(&count, "1");
  for (int i = 0; i < plan->nlaunches && rc == KA_OK; i++) {
    ka_plan_launch *l = &plan->launches[i];
    int k = unit_of[i];
    char want[KA_TRITON_NAME_MAX];
    snprintf(want, sizeof want, "%.100s__ka%d", l->kernel, k);
    if (strcmp(u[k].name, want)) {
      rc = ka_seterr(err, errlen, KA_EINVAL, "the triton image has no unit for launch %d (%s)",
                     i + 1, l->kernel);
      break;
    }
    if (l->nargs + 2 > KA_MAX_ARGS) {
      rc = ka_seterr(err, errlen, KA_ECOMPILE, "launch %d: too many args", i + 1);
      break;
    }
    char b[24];
    free(l->kernel);
    l->kernel = strdup(u[k].name);
    free(l->block[0]);
    snprintf(b, sizeof b, "%u", 32 * u[k].warps);
    l->block[0] = strdup(b);
    free(l->shared_bytes);
    snprintf(b, sizeof b, "%u", u[k].shared);
    l->shared_bytes = strdup(b);
    /* Triton's trailing parameters: global scratch, profile scratch (3.6) */
    l->args[l->nargs++] = strdup(TR_SCRATCH);
    l->args[l->nargs++] = strdup(TR_SCRATCH);
    if (u[k].scratch_bytes) {
      ka_sb more = {0};
      ka_sb_printf(&more, "max(%s, (%s) * (%s) * (%s) * %llu)", count.s ? count.s : "1", l->grid[0],
                   l->grid[1], l->grid[2], (unsigned long long)u[k].scratch_bytes);
      ka_sb_free(&count);
      count = more;
    }
  }
  if (rc == KA_OK && count.oom) rc = ka_seterr(err, errlen, KA_ENOMEM, "out of memory");
  if (rc == KA_OK && count.len > KA_EXPR_MAX_LEN)
    rc = ka_seterr(err, errlen, KA_ECOMPILE,
                   "Triton's global scratch needs a size expression longer than %d characters "
                   "(shorter grid expressions fit)",
                   KA_EXPR_MAX_LEN);
  if (rc != KA_OK) {
    ka_sb_free(&count);
    return rc;
  }
  for (int i = 0; i < plan->nkernels; i++) free(plan->kernels[i]);
  for (int k = 0; k < n; k++) plan->kernels[k] = strdup(u[k].name);
  plan->nkernels = n;
  ka_plan_scratch *s = &plan->scratch[plan->nscratch++];
  s->name = strdup(TR_SCRATCH);
  s->dtype = KA_DT_U8;
  s->count = ka_sb_take(&count);
  return KA_OK;
}

int ka_triton_prepare(const ka_task *t, ka_plan *plan, const ka_source *src, const void *image,
                      size_t image_len, const char *arch, const char *workdir, double timeout_s,
                      void **built, size_t *built_len, char **log, char *err, size_t errlen) {
  *built = NULL;
  *built_len = 0;
  if (log) *log = NULL;
  const void *b = image;
  size_t n = image_len;
  if (!b || !n) {
    int cached = 0;
    int rc = ka_triton_build(t, plan, src, arch, workdir, timeout_s, built, built_len, &cached, log,
                             err, errlen);
    if (rc) return rc;
    b = *built, n = *built_len;
  }
  int rc = ka_triton_plan_apply(t, plan, b, n, err, errlen);
  if (rc) {
    free(*built);
    *built = NULL, *built_len = 0;
    if (log && !*log) {
      ka_sb sb = {0};
      ka_sb_printf(&sb, "%s\n", err);
      *log = ka_sb_take(&sb);
    }
  }
  return rc;
}

int ka_triton_probe(const char *python, char *version, size_t vlen, char *prefix, size_t plen,
                    char *exe, size_t elen, char *err, size_t errlen) {
  version[0] = prefix[0] = exe[0] = '\0';
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) != 0)
    return ka_seterr(err, errlen, KA_ESYS, "pipe: %s", strerror(errno));
  char *argv[] = {(char *)python, "-c",
                  "import os, sys, triton; print(triton.__version__); "
                  "site = os.path.dirname(os.path.dirname(os.path.abspath(triton.__file__))); "
                  "print(sys.prefix + ':' + sys.base_prefix + ':' + site); print(sys.executable); "
                  "print(site)",
                  NULL};
  pid_t pid = fork();
  if (pid < 0) {
    close(pfd[0]), close(pfd[1]);
    return ka_seterr(err, errlen, KA_ESYS, "fork: %s", strerror(errno));
  }
  if (pid == 0) {
    dup2(pfd[1], 1);
    int dn = open("/dev/null", O_WRONLY);
    if (dn >= 0) dup2(dn, 2);
    execv(python, argv);
    execvp(python, argv);
    _exit(127);
  }
  close(pfd[1]);
  ka_sb sb = {0};
  char buf[1024];
  ssize_t n;
  while ((n = read(pfd[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0 && sb.len < 8192) ka_sb_append(&sb, buf, (size_t)n);
  close(pfd[0]);
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  char *out = ka_sb_take(&sb);
  int rc = KA_OK;
  char *nl = out ? strchr(out, '\n') : NULL;
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !nl) {
    rc = ka_seterr(err, errlen, KA_EUNAVAIL, "%s cannot import triton%s", python,
                   WIFEXITED(st) && WEXITSTATUS(st) == 127 ? " (no such program)" : "");
  } else {
    *nl = '\0';
    char *p = nl + 1, *x = strchr(p, '\n'), *sd = NULL;
    if (x) *x++ = '\0';
    if (x && (sd = strchr(x, '\n'))) *sd++ = '\0';
    if (sd) sd[strcspn(sd, "\n")] = '\0';
    snprintf(version, vlen, "%s", out);
    snprintf(prefix, plen, "%s", p);
    snprintf(exe, elen, "%s", x && x[0] == '/' ? x : python);
    if (sd && sd[0] == '/') setenv("KA_TRITON_SITE", sd, 1);
  }
  free(out);
  return rc;
}

int ka_triton_setup(const char *exedir, const char *cache_dir, const char *python,
                    const char *tcache, char *msg, size_t msglen) {
  static int state = -1;
  static char said[768];
  if (state >= 0) {
    snprintf(msg, msglen, "%s", said);
    return state;
  }
  char venv[PATH_MAX];
  snprintf(venv, sizeof venv, "%s/../../.venv/bin/python3", exedir);
  if (!python) python = getenv("KA_TRITON_PYTHON");
  if (!python || !*python) python = access(venv, X_OK) == 0 ? venv : "python3";
  char ver[64], prefix[2 * PATH_MAX + 2], exe[PATH_MAX], err[512], dir[PATH_MAX + 8];
  state = 0;
  if (ka_triton_probe(python, ver, sizeof ver, prefix, sizeof prefix, exe, sizeof exe, err,
                      sizeof err)) {
    snprintf(said, sizeof said,
             "language triton needs a Python with triton: %s "
             "(scripts/install-python-deps.sh installs it into .venv; or --triton-python PATH)",
             err);
  } else {
    snprintf(dir, sizeof dir, "%s/triton", cache_dir);
    if (!tcache) tcache = dir;
    setenv("KA_TRITON_PYTHON", exe, 1); /* absolute: the runners exec it without PATH */
    setenv("KA_TRITON_PREFIX", prefix, 1);
    setenv("KA_TRITON_VERSION", ver, 1);
    setenv("KA_TRITON_CACHE", tcache, 1);
    snprintf(said, sizeof said, "triton %s (%s), compile cache %s", ver, exe, tcache);
    state = 1;
  }
  snprintf(msg, msglen, "%s", said);
  return state;
}
