#!/usr/bin/env python3
"""The Python client under faults and trainer-style use (issue 18), against a real
envserver + gpuexec on the host backend (host/gelu with small cases):

    python_faults_test.py BIN_DIR SOURCE_DIR CASE

CASE:
  restart     a server restart (kill -9, same state folder) in the middle of a GRPO group
              of 8: rollouts() loses no rollout (replayed in new episodes), Env.step raises
              a retryable KernelArenaError (no pynng exception), cleanup raises nothing
  pickle      KernelArenaError from a real failed call crosses multiprocessing intact
  tls         mutual TLS: an envserver with --tls-client-ca on a tls+tcp:// endpoint;
              Client, TextEpisode and SkyRL with the CA, a client certificate and key;
              refused handshakes fail fast and say why; bad TLS options
  connect     a first connect to no server (a missing ipc socket file, a refused tcp port)
              fails fast (Client, AsyncClient, TextEpisode, SkyRL) with a clear message;
              a restart of a server reached before is still waited for
  vector      gymnasium.make_vec(..., vectorization_mode="async") with its defaults (fork,
              shared memory): reset and step in 2 envs; a child forked after nng was
              started gets FAILED_PRECONDITION, not a process abort
  components  the reward components have one key set for COMPILE_ERROR, INCORRECT and OK;
              the status is a label in info["status"] and in Rollout.statuses
  prompts     envctl tasks --prompts and ListTasks(include_prompts): a row per task and
              seed whose prompt and files are those a Reset shows
  text        the text layer (kernelarena.integrations.text) on a GRPO-shaped group of 8
  skyrl       SkyRL-gym: skyrl_gym.make("kernelarena") as its generator runs it, 8 at once
  skyrl_restart  a server restart (kill -9) in the middle of a SkyRL group of 8: no
              trajectory lost (the text layer replays lost episodes), 0 errors
  openenv     OpenEnv: openenv-core's server in front of the envserver, its HTTP endpoints,
              and 8 WebSocket sessions (its EnvClient) at once; their episodes closed after;
              then 8 more with a server restart (kill -9) in their middle: none lost
  verifiers   verifiers: vf-eval kernelarena-verifiers (the v1 plugin) against a stub
              OpenAI-compatible model, -r 8, 0 errors; then 2 turns; -r 8 across a server
              restart; no file on the last step (.venv-verifiers)
  nemo_gym    NeMo-Gym: the resources server's app, 8 POST /verify at once, 0 errors
              (.venv-nemo, Python 3.12); then 8 across a server restart: none lost
  trl         TRL: the environment_factory class through GRPOTrainer's calls (trl 1.16.0),
              its tool schema by transformers, 8 pooled rollouts, then the pool reused
              with a server restart (kill -9) in the middle of that batch: none lost
  trl_grpo    a real TRL GRPOTrainer (.venv-trl, torch on the CPU) with kernelarena's
              environment_factory, a tiny random model built in the test, 8 generations,
              2 steps on host tasks: rollouts evaluated, episodes closed, 0 errors
  reproducible  Evaluate(reproducible=True) with the admin token repeats its inputs across
              an executor restart (same per-case errors); a plain Evaluate does not; without
              the token it is PERMISSION_DENIED; a recorded step re-evaluated on the
              executor that ran it sees the inputs its episode had
Prints "ok - ..." per check and exits 1 at the first failure (with the logs).
"""
import asyncio
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients",
                                "python"))

import gymnasium  # noqa: E402

import kernelarena  # noqa: E402
from kernelarena import KernelArenaError  # noqa: E402

T0 = time.monotonic()
PROCS = {}
# set by main (a spawned multiprocessing worker imports this file without running it)
BIN = SRC = CASE = WORK = TASKS = STATE = URL = GELU = WRONG = ""


def logs():
    for name in ("server.log", "gpuexec.log", "openenv.log"):
        try:
            sys.stdout.write(f"---- {name}\n" + open(os.path.join(WORK, name)).read()[-5000:])
        except OSError:
            pass


def check(cond, what):
    if not cond:
        print("FAIL -", what, flush=True)
        logs()
        sys.exit(1)
    print(f"ok   - [{time.monotonic() - T0:5.1f} s] {what}", flush=True)


def make_tasks():
    tasks = os.path.join(WORK, "tasks")
    os.makedirs(os.path.join(tasks, "host"))
    dst = os.path.join(tasks, "host", "gelu")
    shutil.copytree(os.path.join(SRC, "tasks", "host", "gelu"), dst)
    ty = os.path.join(dst, "task.yaml")
    y = open(ty).read()
    y = y.replace("n: 1048576}", "n: 65536}").replace("n: 2097152}", "n: 131072}")
    y = y.replace("n: 1000003}", "n: 65537}")
    open(ty, "w").write("\n".join("timeout_s: 300" if ln.startswith("timeout_s:") else ln
                                  for ln in y.split("\n")))
    return tasks




def start_server():
    log = open(os.path.join(WORK, "server.log"), "a")
    PROCS["server"] = subprocess.Popen([os.path.join(BIN, "envserver"), "--state", STATE,
                                        "--tasks", TASKS], stderr=log, stdout=log)


def start_stack():
    start_server()
    log = open(os.path.join(WORK, "gpuexec.log"), "a")
    os.makedirs(os.path.join(WORK, "tmp"), exist_ok=True)
    PROCS["gpuexec"] = subprocess.Popen(
        [os.path.join(BIN, "gpuexec"), "--server", f"ipc://{STATE}/exec.ipc", "--tasks", TASKS,
         "--backends", "host"], stderr=log, stdout=log,
        env=dict(os.environ, TMPDIR=os.path.join(WORK, "tmp")))


def kill_and_restart(delay=0.5):
    """kill -9 the envserver now, and start it again on its state folder delay seconds
    later (on a timer thread; the caller goes on at once). Returns the timer."""
    PROCS["server"].kill()
    PROCS["server"].wait()
    t = threading.Timer(delay, start_server)
    t.start()
    return t


def wait_ready_elsewhere(timeout=60):
    """Waits for a live executor from a child process: this one must not start nng."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import kernelarena; "
            "kernelarena.Client(sys.argv[2]).wait_ready(timeout_s=float(sys.argv[3]))")
    r = subprocess.run([sys.executable, "-c", code, os.path.join(SRC, "clients", "python"), URL,
                        str(timeout)])
    check(r.returncode == 0, "the server and an executor are up")


def stop_all():
    for p in PROCS.values():
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    if not os.environ.get("KA_KEEP_TMP"):
        shutil.rmtree(WORK, ignore_errors=True)


def baseline_policy(ob, i):
    return {"gelu.c": GELU}


# ---------------------------------------------------------------- cases

def case_restart():
    start_stack()
    wait_ready_elsewhere()
    c = kernelarena.Client(URL, timeout_s=120)
    env = kernelarena.Env("host/gelu", url=URL, timeout_s=120)
    env.reset(seed=5)
    killed = threading.Event()

    def killer():
        # once 3 rollouts of the group are done (their episodes closed) and the others'
        # steps are queued or running: kill -9 and restart
        end, seen = time.time() + 60, False
        while time.time() < end:
            try:
                h = c.health(timeout_s=2)
                seen = seen or h.open_episodes >= 8
                if seen and h.queued_jobs + h.running_jobs >= 1 and h.open_episodes <= 5:
                    break
            except KernelArenaError:
                pass
            time.sleep(0.05)
        PROCS["server"].kill()
        PROCS["server"].wait()
        killed.set()
        time.sleep(0.5)
        start_server()

    async def group():
        async with kernelarena.AsyncClient(URL, timeout_s=120) as ac:
            return await kernelarena.rollouts(ac, "host/gelu", 11, 8, baseline_policy)

    th = threading.Thread(target=killer)
    th.start()
    t = time.monotonic()
    ros = asyncio.run(group())
    th.join()
    check(killed.is_set(), "the server was killed and restarted during the group")
    errs = [r.error for r in ros if r.error]
    print(f"     group of 8 in {time.monotonic() - t:.1f} s; episodes per rollout:",
          [r.episodes for r in ros])
    check(not errs, f"no rollout lost across the restart: {errs}")
    check(all(r.statuses == ["OK"] and r.rewards[0] > 120 for r in ros),
          "every rollout has its step, OK")
    check(any(r.episodes > 1 for r in ros) and any(r.episodes == 1 for r in ros),
          "rollouts done before the restart kept their episode; the others were replayed")
    # Env.step on an episode of the dead server: a KernelArenaError, never pynng's
    try:
        env.step({"gelu.c": GELU})
        check(False, "a step on an episode of the killed server answered")
    except KernelArenaError as e:
        check(e.code in ("FAILED_PRECONDITION", "UNAVAILABLE"),
              f"Env.step after the restart: KernelArenaError {e.code}")
    except Exception as e:  # noqa: BLE001
        check(False, f"Env.step raised {type(e).__name__}: {e}")
    env.close()
    env.close()
    check(True, "Env.close after the restart raises nothing (twice)")
    # a killed server mid-step: the error is retryable and the cleanup quiet
    ep = c.reset("host/gelu", seed=1).episode_id
    out = {}

    def step():
        try:
            c.step(ep, 0, {"gelu.c": GELU})
            out["r"] = "reply"
        except Exception as e:  # noqa: BLE001
            out["r"] = e
    th = threading.Thread(target=step)
    th.start()
    time.sleep(0.05)
    PROCS["server"].kill()
    th.join(20)
    x = out.get("r")
    check(x == "reply" or (isinstance(x, KernelArenaError) and x.retryable),
          f"Client.step as the server dies: {type(x).__name__}: {x}")
    c.close()
    try:
        c.health()
        check(False, "a closed client answered")
    except KernelArenaError as e:
        check(e.code == "FAILED_PRECONDITION" and not e.retryable,
              "a call on a closed client: FAILED_PRECONDITION, not retryable")


def _fail_call(url):
    kernelarena.Client(url, timeout_s=1, connect_timeout_s=0.5).health(timeout_s=0.5)


def case_pickle():
    url = f"ipc://{WORK}/nobody.ipc"
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        try:
            pool.apply(_fail_call, (url,))
            check(False, "a call to no server succeeded")
        except KernelArenaError as e:
            check(e.code == "UNAVAILABLE" and not e.retryable and url in e.message and
                  "no kernelarena server" in e.message,
                  f"the worker's KernelArenaError arrived intact: {e}")
    with multiprocessing.get_context("fork").Pool(1) as pool:
        try:
            pool.apply(_fail_call, ("no-scheme",))
        except KernelArenaError as e:
            check(e.code == "INVALID_ARGUMENT" and not e.retryable,
                  f"and from a forked worker: {e.code}")


def _fails_fast(what, call, url, bound=3.0):
    """call() must raise KernelArenaError UNAVAILABLE, not retryable, naming url and
    saying there is no server, within bound seconds."""
    t = time.monotonic()
    try:
        call()
        check(False, f"{what}: answered with no server at {url}")
    except KernelArenaError as e:
        dt = time.monotonic() - t
        check(e.code == "UNAVAILABLE" and not e.retryable and url in e.message and
              "no kernelarena server" in e.message and dt < bound,
              f"{what}: failed in {dt:.2f} s (< {bound:g}): {e}")
        return e


def case_connect():
    """A first connect to no server fails fast (it took ~75 s through the text layer's
    retries): an ipc:// socket file that does not exist and a refused tcp:// port, through
    Client, AsyncClient, TextEpisode and SkyRL's env; the error says why. A server that
    starts later is then reached by the same Client, and once reached, a server restart
    is waited for by a client made while it is down (not failed fast)."""
    need("skyrl_gym", "")
    import skyrl_gym
    import kernelarena.integrations.skyrl  # noqa: F401 - registers "kernelarena"
    from kernelarena.integrations.text import TextEpisode
    gone = f"ipc://{WORK}/no/such/env.ipc"
    e = _fails_fast("TextEpisode.reset, ipc socket file missing",
                    lambda: TextEpisode("host/gelu", url=gone).reset(seed=1), gone)
    check("does not exist" in e.message and "wait_ready" in e.message,
          "the message names the missing socket file and wait_ready")
    refused = f"tcp://127.0.0.1:{free_port()}"
    e = _fails_fast("TextEpisode.reset, tcp refused",
                    lambda: TextEpisode("host/gelu", url=refused).reset(seed=1), refused)
    check("connection refused" in e.message, "the message says the connection was refused")

    async def acall():
        async with kernelarena.AsyncClient(URL) as ac:
            await ac.health()
    _fails_fast("AsyncClient.health before the server starts", lambda: asyncio.run(acall()), URL)

    def skyrl_init():
        env = skyrl_gym.make("kernelarena", env_config={"url": URL},
                             extras={"task_id": "host/gelu", "seed": 3})
        try:
            env.init([])
        finally:
            env.close()
    _fails_fast("skyrl env.init", skyrl_init, URL)
    c = kernelarena.Client(URL, timeout_s=30)
    _fails_fast("Client.health", c.health, URL)
    start_stack()
    c.wait_ready(timeout_s=60)
    check(c.health().executors >= 1, "the same Client reaches the server once it is up")
    PROCS["server"].kill()
    PROCS["server"].wait()
    threading.Timer(1.0, start_server).start()
    t = time.monotonic()
    ep = TextEpisode("host/gelu", url=URL, timeout_s=60)
    try:
        prompt = ep.reset(seed=5)
    finally:
        ep.close()
    check("## How to reply" in prompt and time.monotonic() - t > 0.5,
          f"a URL reached before: a new TextEpisode made while the server restarts waits for "
          f"it ({time.monotonic() - t:.1f} s), no fast failure")


def make_certs():
    """tests/certs.sh's certificates (openssl, made here): ca, server (named localhost),
    exec (a clientAuth certificate of the CA), other-ca and rogue (of another CA)."""
    d = os.path.join(WORK, "certs")
    r = subprocess.run(["sh", "-c", '. "$0/tests/certs.sh" && ka_certs "$1" localhost', SRC, d],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"openssl made the test certificates {r.stdout[-300:]}")
    return lambda name: os.path.join(d, name)


def case_tls():
    """The client over mutual TLS: an envserver whose tls+tcp:// client endpoint requires
    client certificates of a CA (--tls-client-ca). Client, TextEpisode and SkyRL's env
    with the CA, a client certificate and its key run episodes; without a client
    certificate, with another CA's, not trusting the server's CA, or with the wrong
    server name the first call fails fast saying why (UNAVAILABLE, not retryable) and
    the server lost nothing; bad TLS options are INVALID_ARGUMENT; envserver refuses
    --tls-client-ca on a plain endpoint."""
    global URL
    need("skyrl_gym", "")
    import skyrl_gym
    import kernelarena.integrations.skyrl  # noqa: F401 - registers "kernelarena"
    from kernelarena.integrations.text import TextEpisode
    c = make_certs()
    r = subprocess.run([os.path.join(BIN, "envserver"), "--state", os.path.join(WORK, "plain"),
                        "--tasks", TASKS, "--tls-client-ca", c("ca.crt")], capture_output=True,
                       text=True, timeout=30)
    check(r.returncode != 0 and "--tls-client-ca needs a tls+tcp://" in r.stderr,
          f"envserver refuses --tls-client-ca on a plain endpoint: {r.stderr.strip()[-160:]}")
    URL = f"tls+tcp://localhost:{free_port()}"
    log = open(os.path.join(WORK, "server.log"), "a")
    PROCS["server"] = subprocess.Popen(
        [os.path.join(BIN, "envserver"), "--state", STATE, "--tasks", TASKS, "--listen", URL,
         "--exec-listen", f"ipc://{STATE}/exec.ipc", "--tls-cert", c("server.crt"),
         "--tls-key", c("server.key"), "--tls-client-ca", c("ca.crt")], stderr=log, stdout=log)
    log = open(os.path.join(WORK, "gpuexec.log"), "a")
    os.makedirs(os.path.join(WORK, "tmp"), exist_ok=True)
    PROCS["gpuexec"] = subprocess.Popen(
        [os.path.join(BIN, "gpuexec"), "--server", f"ipc://{STATE}/exec.ipc", "--tasks", TASKS,
         "--backends", "host"], stderr=log, stdout=log,
        env=dict(os.environ, TMPDIR=os.path.join(WORK, "tmp")))
    # a child process finds the TLS files in $KA_TLS_* (Client's defaults)
    os.environ.update(KA_TLS_CA=c("ca.crt"), KA_TLS_CERT=c("exec.crt"), KA_TLS_KEY=c("exec.key"))
    wait_ready_elsewhere()
    for k in ("KA_TLS_CA", "KA_TLS_CERT", "KA_TLS_KEY"):
        del os.environ[k]
    check(True, "a client with the TLS files in $KA_TLS_CA, $KA_TLS_CERT, $KA_TLS_KEY connects")
    good = {"ca": c("ca.crt"), "cert": c("exec.crt"), "key": c("exec.key")}
    bad = [("no client certificate", {"ca": c("ca.crt")}),
           ("another CA's client certificate", {"ca": c("ca.crt"), "cert": c("rogue.crt"),
                                                "key": c("rogue.key")}),
           ("not trusting the server's CA", dict(good, ca=c("other-ca.crt"))),
           ("a server name its certificate lacks", dict(good, server_name="elsewhere"))]
    for what, tls in bad:
        t = time.monotonic()
        try:
            kernelarena.Client(URL, timeout_s=10, tls=tls).health()
            check(False, f"{what}: the call was answered")
        except KernelArenaError as e:
            dt = time.monotonic() - t
            check(e.code == "UNAVAILABLE" and not e.retryable and "TLS handshake" in e.message
                  and dt < 5, f"{what}: refused in {dt:.2f} s: {e.message[:150]}")
    for what, url, tls, text in (
            ("no CA", URL, {"cert": c("exec.crt"), "key": c("exec.key")}, "needs the CA"),
            ("a certificate without its key", URL, {"ca": c("ca.crt"), "cert": c("exec.crt")},
             "go together"),
            ("a missing file", URL, dict(good, key=c("nope.key")), "cannot read the TLS key"),
            ("TLS options on ipc://", f"ipc://{STATE}/env.ipc", good, "need a tls+tcp:// URL")):
        try:
            kernelarena.Client(url, tls=tls)
            check(False, f"{what}: accepted")
        except KernelArenaError as e:
            check(e.code == "INVALID_ARGUMENT" and text in e.message, f"{what}: {e.message}")
    cl = kernelarena.Client(URL, timeout_s=120, tls=good)
    h = cl.health()
    check(h.executors >= 1 and h.open_episodes == 0,
          f"over mutual TLS: health answers, and the refused clients left nothing open")
    ep = TextEpisode("host/gelu", url=URL, timeout_s=120, tls=good)
    try:
        ep.reset(seed=3)
        r = ep.step(reply(GELU))
    finally:
        ep.close()
    check(r.status == "OK" and r.reward > 1.2, f"a TextEpisode over mutual TLS: {r.status}")
    env = skyrl_gym.make("kernelarena", env_config={
        "url": URL, "timeout_s": 120, "tls_ca": c("ca.crt"), "tls_cert": c("exec.crt"),
        "tls_key": c("exec.key")}, extras={"task_id": "host/gelu", "seed": 4})
    try:
        env.init([])
        out = env.step(reply(WRONG))
    finally:
        env.close()
    check(out["metadata"]["status"] == "INCORRECT" and out["reward"] == 0.2,
          "SkyRL's env with tls_ca, tls_cert, tls_key in env_config: INCORRECT, 0.2")
    h = cl.health()
    check(h.open_episodes == 0, "every episode closed")


def case_vector():
    start_stack()
    wait_ready_elsewhere()
    envs = gymnasium.make_vec("kernelarena/KernelArena-v0", num_envs=2,
                              vectorization_mode="async", task_id="host/gelu", url=URL,
                              max_steps=2, timeout_s=120)
    check(isinstance(envs, gymnasium.vector.AsyncVectorEnv), "make_vec built an AsyncVectorEnv")
    obs, infos = envs.reset(seed=3)
    print("     prompt:", repr(obs["prompt"][0][:60]), "steps", obs["step"])
    check(list(obs["step"]) == [0, 0] and all("GELU" in p for p in obs["prompt"]),
          "both envs reset")
    obs, rew, term, trunc, infos = envs.step({"gelu.c": (GELU, WRONG)})
    print("     rewards", list(rew), "statuses", list(infos["status"]))
    check(rew[0] > 120 and list(obs["status"]) == list(infos["status"]) and
          infos["status"][0] == "OK", "env 0 stepped: the baseline is OK")
    check(infos["status"][1] in ("INCORRECT", "COMPILE_ERROR", "OK"), "env 1 stepped")
    envs.close()
    check(True, "closed")
    # nng started here: a child forked now is refused with a clear error
    kernelarena.Client(URL).health()
    pid = os.fork()
    if pid == 0:
        try:
            kernelarena.Client(URL).health()
            os._exit(3)
        except KernelArenaError as e:
            os._exit(0 if e.code == "FAILED_PRECONDITION" and "fork" in e.message else 4)
        except BaseException:
            os._exit(5)
    _, st = os.waitpid(pid, 0)
    check(os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0,
          f"a child forked after nng started: FAILED_PRECONDITION (status {st})")


def case_components():
    start_stack()
    wait_ready_elsewhere()
    env = kernelarena.Env("host/gelu", url=URL, max_steps=3, timeout_s=120)
    env.reset(seed=2)
    keys, statuses = [], []
    for src in ("int main(", WRONG, GELU):
        _, _, _, _, info = env.step({"gelu.c": src})
        keys.append(sorted(info["reward_components"]))
        statuses.append(info["status"])
    print("     statuses", statuses, "keys", keys[0])
    check(statuses == ["COMPILE_ERROR", "INCORRECT", "OK"], "status labels")
    check(keys[0] == keys[1] == keys[2], "one key set for every status")
    check("status" not in keys[0] and {"compiled", "correct", "speedup_geomean", "flagged",
                                       "speedup/n1M", "speedup/n2M"} <= set(keys[0]),
          "the key set: compiled, correct, speedup_geomean, flagged, speedup/<case>")
    check(all(isinstance(v, float) for v in info["reward_components"].values()), "floats")
    env.close()

    def policy(ob, i):
        if i == 1:
            raise RuntimeError("model server down")
        return {"gelu.c": ("int x(", None, GELU)[i]}

    async def group():
        async with kernelarena.AsyncClient(URL, timeout_s=120) as ac:
            return await kernelarena.rollouts(ac, "nope/task", 4, 1, policy) + \
                await kernelarena.rollouts(ac, "host/gelu", 4, 3, policy)
    ros = asyncio.run(group())
    check(ros[0].error and "NOT_FOUND" in ros[0].error, f"unknown task: {ros[0].error}")
    check([r.statuses for r in ros[1:]] == [["COMPILE_ERROR"], [], ["OK"]] and
          sorted(ros[1].components[0]) == sorted(ros[3].components[0]),
          "Rollout.statuses are labels, components share their keys")
    check(ros[1].error is None and ros[3].error is None and "model server down" in ros[2].error,
          "a failing policy ends its rollout only")


def case_prompts():
    # a task no executor of this stack runs (cuda: the executor has the host backend only)
    shutil.copytree(os.path.join(SRC, "tasks", "cuda2cuda", "gelu"),
                    os.path.join(TASKS, "cuda2cuda", "gelu"))
    start_stack()
    wait_ready_elsewhere()
    out = subprocess.run([os.path.join(BIN, "envctl"), "tasks", "--prompts", "--server", URL,
                          "--seed", "7", "--seeds", "3"], capture_output=True, text=True)
    check(out.returncode == 0, f"envctl tasks --prompts: exit {out.returncode} {out.stderr}")
    rows = [json.loads(ln) for ln in out.stdout.splitlines()]
    check(len(rows) == 3 and [r["seed"] for r in rows] == [7, 8, 9] and
          all(r["task_id"] == "host/gelu" and r["runnable"] for r in rows),
          "one row per task and seed, the runnable tasks only")
    check("1 task left out" in out.stderr, f"the task left out is said: {out.stderr.strip()}")
    every = subprocess.run([os.path.join(BIN, "envctl"), "tasks", "--prompts", "--server", URL,
                            "--all-tasks"], capture_output=True, text=True)
    allrows = {json.loads(ln)["task_id"]: json.loads(ln) for ln in every.stdout.splitlines()}
    check(every.returncode == 0 and set(allrows) == {"host/gelu", "cuda2cuda/gelu"} and
          allrows["cuda2cuda/gelu"]["runnable"] is False, "--all-tasks: every task, runnable said")
    r0 = rows[0]
    check(r0["files"] == {"gelu.c": GELU} and r0["tags"] and r0["case_names"] == ["n1M", "n2M"],
          "files, tags and case names")
    with kernelarena.Client(URL, timeout_s=120) as c:
        rs = c.reset("host/gelu", seed=7)
        check(rs.observation.prompt == r0["prompt"], "the prompt is the one a Reset shows")
        ti = [t for t in c.list_tasks(include_prompts=True) if t.id == "host/gelu"][0]
        check(ti.prompt == r0["prompt"] and {f.path: f.content.decode() for f in ti.files} ==
              r0["files"], "ListTasks(include_prompts) carries the same")
        run = {t.id: t.runnable for t in c.list_tasks()}
        check(run == {"host/gelu": True, "cuda2cuda/gelu": False}, f"ListTasks: runnable {run}")
        plain = [t for t in c.list_tasks() if t.id == "host/gelu"][0]
        check(plain.prompt == "" and not plain.files and list(plain.case_names) == ["n1M", "n2M"],
              "without include_prompts: case names only")
        c.close(rs.episode_id)
    bad = subprocess.run([os.path.join(BIN, "envctl"), "tasks", "--prompts", "--seeds", "0"],
                         capture_output=True, text=True)
    check(bad.returncode == 2 and "--seeds" in bad.stderr, "--seeds 0 is refused (exit 2)")


def reply(src, words="Here is a faster version."):
    return f"{words}\n\n```c gelu.c\n{src}```\n"


def case_text():
    """The text layer against the server: one TextEpisode (a reply with no code block,
    then one with the file), and a group of 4 AsyncTextEpisodes of one seed in flight."""
    from kernelarena.integrations.text import AsyncTextEpisode, TextEpisode
    start_stack()
    wait_ready_elsewhere()
    ep = TextEpisode("host/gelu", url=URL, max_steps=2, timeout_s=120)
    prompt = ep.reset(seed=9)
    check("```c gelu.c" in prompt and "## How to reply" in prompt and "GELU" in prompt,
          "the prompt text: task, current file, reply format")
    r = ep.step("I would keep it as it is.")
    check(not r.evaluated and r.status == "NO_FILES" and r.reward == 0.0 and not r.done and
          "no fenced code block" in r.feedback and "You have 1 step(s) left" in r.feedback,
          "a reply with no block: not evaluated, told why and how many steps are left")
    r = ep.step(reply(GELU))
    check(r.evaluated and r.status == "OK" and r.reward > 1.2 and r.done and
          "Evaluation: OK" in r.feedback and abs(r.reward - r.raw_reward / 100) < 1e-9,
          f"the baseline in a block: OK, scaled reward {r.reward:.3f}, done")
    # a reply with no block on the last step: its feedback still says why, and that the
    # episode is over (not the reply format again, as if another turn came)
    prompt = ep.reset(seed=9)
    ep.step(reply(GELU))
    r = ep.step("Done, nothing more to change.")
    check(not r.evaluated and r.status == "NO_FILES" and r.done and
          "no fenced code block" in r.feedback and "the episode is over" in r.feedback and
          "Reply with the complete" not in r.feedback,
          f"no block on the last step: the feedback says why and that the episode is over: "
          f"{r.feedback!r}")
    ep.close()

    async def group():
        async with kernelarena.AsyncClient(URL, timeout_s=120) as ac:
            eps = [AsyncTextEpisode("host/gelu", client=ac) for _ in range(4)]
            prompts = await asyncio.gather(*(e.reset(seed=13) for e in eps))
            replies = [reply(WRONG if i == 3 else GELU) for i in range(4)]
            outs = await asyncio.gather(*(e.step(x) for e, x in zip(eps, replies)))
            await asyncio.gather(*(e.close() for e in eps))
            return prompts, outs
    prompts, outs = asyncio.run(group())
    check(len(set(prompts)) == 1, "the group of one seed shares its prompt")
    sts = [o.status for o in outs]
    print("     statuses", sts)
    check(sts == ["OK", "OK", "OK", "INCORRECT"] and all(o.done for o in outs),
          "a group of 4 in flight: 0 errors, 3 OK and 1 INCORRECT")
    adv = kernelarena.group_advantages([o.reward for o in outs])
    # the wrong reply ranks lowest; how the OK ones rank among themselves is timing noise
    check(adv[3] < 0 and adv[3] < min(adv[:3]), f"group advantages rank the wrong reply lowest: {adv}")


def case_skyrl():
    """SkyRL-gym: skyrl_gym.make("kernelarena", ...) as SkyRL's generator calls it (init,
    step until done, close), a GRPO-shaped group of 8 of one seed on threads, 0 errors."""
    import concurrent.futures
    import skyrl_gym
    import kernelarena.integrations.skyrl  # noqa: F401 - registers "kernelarena"
    start_stack()
    wait_ready_elsewhere()
    cfg = {"url": URL, "max_steps": 1, "timeout_s": 120}
    row = json.loads(subprocess.run([os.path.join(BIN, "envctl"), "tasks", "--prompts",
                                     "--server", URL, "--seed", "21"], capture_output=True,
                                    text=True, check=True).stdout.splitlines()[0])

    def trajectory(i):
        env = skyrl_gym.make("kernelarena", env_config=cfg,
                             extras={"task_id": row["task_id"], "seed": row["seed"]})
        try:
            chat, meta = env.init([{"role": "system", "content": "You write fast C."}])
            assert chat[0]["role"] == "system" and chat[-1]["role"] == "user"
            rewards, done = [], False
            while not done:
                out = env.step(reply(WRONG if i == 7 else GELU))
                rewards.append(out["reward"])
                done = out["done"]
            return rewards, out["metadata"]["status"], env.get_metrics(), chat
        finally:
            env.close()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        res = list(pool.map(trajectory, range(8)))
    print("     rewards", [r[0] for r in res])
    check([r[1] for r in res] == ["OK"] * 7 + ["INCORRECT"], "8 trajectories: 0 errors")
    check(all(len(r[0]) == 1 for r in res) and min(r[0][0] for r in res[:7]) > 1.2 and
          res[7][0] == [0.2], "one turn each; scaled rewards 1.2 + speedup, and 0.2 for the wrong one")
    check(res[1][2]["status"] == "OK" and res[1][2]["correct"] == 1.0 and
          "speedup/n1M" in res[1][2], "get_metrics: components and the status label")
    check(len({r[3][-1]["content"] for r in res}) == 1, "the group shares its prompt")


def prompts_row(seed):
    """The first row of `envctl tasks --prompts --seed SEED` (what a trainer's dataset has)."""
    out = subprocess.run([os.path.join(BIN, "envctl"), "tasks", "--prompts", "--server", URL,
                          "--seed", str(seed)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[0])


def need(module, extra):
    """Imports a trainer ecosystem's package; its absence fails loudly (never a skip)."""
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError as e:
        check(False, f"{module} is not installed ({e}): `scripts/install-python-deps.sh"
                     f"{(' ' + extra) if extra else ''}` installs it")


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None):
    import urllib.request
    req = urllib.request.Request(url, method=method, data=None if body is None else
                                 json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def case_openenv():
    """OpenEnv: `python -m kernelarena.integrations.openenv` (openenv-core's create_app)
    in front of the envserver; its HTTP endpoints; then a GRPO-shaped group of 8
    WebSocket sessions (OpenEnv's EnvClient) of one dataset row at once, 0 errors; every
    session's episode is closed once its client leaves; then a group of 8 with a server
    restart (kill -9) in its middle: none lost."""
    need("openenv.core", "")
    from kernelarena.integrations.openenv import KernelArenaAction, KernelArenaEnvClient
    start_stack()
    wait_ready_elsewhere()
    row = prompts_row(23)
    port = free_port()
    log = open(os.path.join(WORK, "openenv.log"), "a")
    PROCS["openenv"] = subprocess.Popen(
        [sys.executable, "-m", "kernelarena.integrations.openenv", "--url", URL, "--port",
         str(port), "--task", "host/gelu", "--timeout-s", "120"], stdout=log, stderr=log,
        env=dict(os.environ, PYTHONPATH=os.path.join(SRC, "clients", "python")))
    base = f"http://127.0.0.1:{port}"
    end = time.time() + 60
    while True:
        try:
            health = http("GET", base + "/health")
            break
        except OSError:
            if time.time() > end or PROCS["openenv"].poll() is not None:
                check(False, "the OpenEnv server starts (openenv.log)")
            time.sleep(0.3)
    check(health.get("status") == "healthy", f"GET /health: {health}")
    schema = http("GET", base + "/schema")
    check("reply" in schema["action"]["properties"] and "text" in schema["observation"]["properties"]
          and "episode_id" in schema["state"]["properties"], "GET /schema: action reply, observation text")
    meta = http("GET", base + "/metadata")
    check(meta["name"] == "kernelarena" and meta["version"] == kernelarena.__version__,
          f"GET /metadata: {meta['name']} {meta['version']}")
    r = http("POST", base + "/reset", {"seed": row["seed"]})
    check("## How to reply" in r["observation"]["text"] and r["done"] is False and
          r["observation"]["task_id"] == "host/gelu", "POST /reset (the default task): the prompt")
    check(http("GET", base + "/state")["episode_id"] is None, "GET /state: a fresh instance")

    async def session(i):
        async with KernelArenaEnvClient(base_url=base, message_timeout_s=120) as env:
            first = await env.reset(task_id=row["task_id"], seed=row["seed"])
            out = await env.step(KernelArenaAction(reply=reply(WRONG if i == 7 else GELU)))
            st = await env.state()
            return first.observation.text, out, st

    async def group():
        return await asyncio.gather(*(session(i) for i in range(8)))
    res = asyncio.run(group())
    sts = [o.observation.status for _, o, _ in res]
    print("     statuses", sts, "rewards", [round(o.reward, 3) for _, o, _ in res])
    check(sts == ["OK"] * 7 + ["INCORRECT"], "8 sessions: 0 errors (7 OK, 1 INCORRECT)")
    check(all(o.done for _, o, _ in res) and min(o.reward for _, o, _ in res[:7]) > 1.2 and
          res[7][1].reward == 0.2, "done after one step; scaled rewards 1.2 + speedup and 0.2")
    check(len({p for p, _, _ in res}) == 1 and row["prompt"].strip()[:200] in res[0][0],
          "the group shares its prompt (the dataset row's, with the files and the reply format)")
    check(res[0][2].step_count == 1 and res[0][2].task_id == "host/gelu" and
          res[0][1].observation.components["correct"] == 1.0, "state and components")
    c = kernelarena.Client(URL, timeout_s=30)
    ids = {o.observation.episode_id for _, o, _ in res}
    end = time.time() + 30
    while not all(c.state(e).closed for e in ids) and time.time() < end:
        time.sleep(0.2)
    check(len(ids) == 8 and all(c.state(e).closed for e in ids),
          "every session's episode is closed once its client left")
    # a server restart (kill -9) in the middle of a group: sessions 0-3 have stepped,
    # 4-7 have reset and step after it; none is lost (the text layer replays their
    # episodes in new ones of the same seed)
    restarted = []

    async def restart_group():
        envs = [KernelArenaEnvClient(base_url=base, message_timeout_s=120) for _ in range(8)]
        for e in envs:
            await e.connect()
        try:
            firsts = await asyncio.gather(*(e.reset(task_id=row["task_id"], seed=row["seed"])
                                            for e in envs))
            outs = list(await asyncio.gather(*(e.step(KernelArenaAction(reply=reply(GELU)))
                                               for e in envs[:4])))
            restarted.append(kill_and_restart())
            outs += await asyncio.gather(*(e.step(KernelArenaAction(reply=reply(GELU)))
                                           for e in envs[4:]))
            return firsts, outs
        finally:
            for e in envs:
                await e.close()
    firsts, outs = asyncio.run(restart_group())
    restarted[0].join()
    sts = [o.observation.status for o in outs]
    replayed = [f.observation.episode_id != o.observation.episode_id for f, o in zip(firsts, outs)]
    print("     across the restart: statuses", sts, "replayed", replayed)
    check(sts == ["OK"] * 8 and all(o.reward > 1.2 for o in outs),
          "a server restart in the middle of a group of 8 sessions: 0 errors, 8 OK")
    check(replayed == [False] * 4 + [True] * 4,
          "the 4 sessions stepped before it kept their episodes; the 4 after were replayed")


def case_trl():
    """TRL: KernelArenaTRLEnv through the calls GRPOTrainer(environment_factory=...) makes
    in trl 1.16.0 (trl/trainer/grpo_trainer.py; trl itself needs torch, too heavy to
    install here): the probe (factory(), reset/get_reward/tools found on the class), the
    tool schema (transformers' get_json_schema, what apply_chat_template(tools=...)
    renders), a GRPO-shaped group of 8 pooled instances (reset(**row), the observation
    appended to the last user message, tool calls dispatched as method(**arguments) with
    exceptions turned into {"error": ...}), get_reward per rollout; then the pool reused
    for a second batch, as TRL reuses it, with a server restart (kill -9) in its middle:
    no rollout lost. 0 errors."""
    import inspect
    get_json_schema = need("transformers.utils", "").get_json_schema
    from kernelarena.integrations.trl import environment_factory, trl_rows
    start_stack()
    wait_ready_elsewhere()
    factory = environment_factory(url=URL, max_steps=2, timeout_s=120)
    # the probe (grpo_trainer.py, __init__: "for name, factory in ...")
    probe = factory()
    names = [n for n, _ in inspect.getmembers(type(probe), predicate=inspect.isfunction)]
    tools = [getattr(probe, n) for n in names if n not in ("reset", "get_reward")
             and not n.startswith("_")]
    check("reset" in names and "get_reward" in names and [t.__name__ for t in tools] == ["submit"],
          f"the probe: reset, get_reward and one tool, submit (members {names})")
    schema = get_json_schema(tools[0])
    props = schema["function"]["parameters"]["properties"]
    check(schema["function"]["name"] == "submit" and set(props) == {"path", "content"} and
          all(props[k]["type"] == "string" and props[k]["description"] for k in props) and
          schema["function"]["parameters"]["required"] == ["path", "content"],
          "the tool schema (transformers get_json_schema): submit(path, content), both described")
    rows = trl_rows([prompts_row(31)] * 8, system_prompt="You write fast C.")
    pool = [probe]

    def batch(policy):
        # _generate_and_score_completions: one pooled instance per rollout
        envs = []
        for i in range(len(rows)):
            if i == len(pool):
                pool.append(factory())
            envs.append(pool[i])
        prompts = [x.get("prompt", [{"role": "user", "content": ""}]) for x in rows]
        for i, (prompt, env, x) in enumerate(zip(prompts, envs, rows)):
            obs = env.reset(**x)
            if obs is not None:
                prompts[i] = prompt[:-1] + [{**prompt[-1], "content": prompt[-1]["content"] + obs}]
        results = []
        for i, env in enumerate(envs):  # _tool_call_loop: sync tools, method(**arguments)
            tool = {n: getattr(env, n) for n in names if n not in ("reset", "get_reward")
                    and not n.startswith("_")}
            out = []
            for call in policy(i):
                try:
                    out.append(tool[call["function"]["name"]](**call["function"]["arguments"]))
                except Exception as e:  # noqa: BLE001 - what TRL does
                    out.append({"error": str(e)})
            results.append(out)
        eids = [e._ep.episode_id for e in envs]
        return prompts, results, [e.get_reward() for e in envs], eids

    def submit(src):
        return {"type": "function", "function": {"name": "submit",
                                                 "arguments": {"path": "gelu.c", "content": src}}}

    def policy(i):
        if i == 6:  # a file that may not change, then the kernel
            return [{"type": "function", "function": {"name": "submit", "arguments": {
                "path": "task.yaml", "content": "x"}}}, submit(GELU)]
        if i == 5:  # two steps, then a third call past max_steps
            return [submit(WRONG), submit(GELU), submit(GELU)]
        return [submit(WRONG if i == 7 else GELU)]
    prompts, results, rewards, eids = batch(policy)
    print("     rewards", [round(r, 3) for r in rewards])
    check(len({p[-1]["content"] for p in prompts}) == 1 and prompts[0][0]["role"] == "system" and
          "call the tool `submit`" in prompts[0][-1]["content"].lower() and
          "```c gelu.c" in prompts[0][-1]["content"],
          "reset's text is appended to the last user message: the task, the file, the tool")
    check(all(r > 1.2 for r in rewards[:7]) and rewards[7] == 0.2,
          "8 rollouts: 0 errors; get_reward 1.2 + speedup, 0.2 for the wrong kernel")
    check("Nothing was evaluated" in results[6][0] and "`task.yaml` may not change" in results[6][0]
          and "Evaluation: OK" in results[6][1], "a file that may not change is not evaluated, told why")
    check("Evaluation: INCORRECT" in results[5][0] and "1 step(s) left" in results[5][0] and
          "Evaluation: OK" in results[5][1] and isinstance(results[5][2], dict) and
          "no steps left" in results[5][2]["error"], "max_steps: a third call is a tool error")
    c = kernelarena.Client(URL, timeout_s=30)
    check(len(set(eids)) == 8 and all(c.state(e).closed for e in eids),
          "get_reward closed every rollout's episode")
    # the pool reused for a second batch, with a server restart (kill -9) in its middle:
    # rollouts 0-2 have submitted, 3-7 submit after it (their episodes, reset before it,
    # are lost and replayed by the text layer); no rollout lost
    restarted = []

    def restart_policy(i):
        if i == 3:
            restarted.append(kill_and_restart())
        return [submit(GELU)]
    _, results2, rewards2, _ = batch(restart_policy)
    restarted[0].join()
    print("     across the restart: rewards", [round(r, 3) for r in rewards2])
    check(len(pool) == 8 and all(r > 1.2 for r in rewards2) and
          all(len(x) == 1 and "Evaluation: OK" in x[0] for x in results2),
          "the pool reused for a second batch, a server restart in its middle: 8 instances, "
          "0 errors, 8 OK")
    check(sum(e._ep.replays for e in pool) >= 5,
          f"the rollouts after it were replayed ({[e._ep.replays for e in pool]})")
    for e in pool:
        e._close()


def tiny_chat_model(actions):
    """A tiny randomly initialised causal LM (Qwen2, 1 layer, width 32) and its tokenizer,
    both built here (nothing downloaded): a word-level vocabulary of the chat template's
    special tokens, [UNK] (every word of a prompt) and one token per string of actions
    (whole tool calls: what the random model samples decodes to them exactly). The chat
    template is Qwen2.5's, shipped in trl's package, so trl's add_response_schema parses
    the tool calls. Returns (model, tokenizer, {action: token id})."""
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers
    from trl.chat_template_utils import qwen2_5_chat_template
    tok = Tokenizer(models.WordLevel(vocab={"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tk = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]",
                                              pad_token="<|endoftext|>", eos_token="<|im_end|>")
    tk.add_special_tokens({"additional_special_tokens": ["<|im_start|>"]})
    tk.add_tokens(list(actions))
    tk.chat_template = qwen2_5_chat_template
    ids = {a: tk.convert_tokens_to_ids(a) for a in actions}
    torch.manual_seed(0)
    cfg = transformers.Qwen2Config(vocab_size=len(tk), hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=1, num_attention_heads=2,
                                   num_key_value_heads=1, max_position_embeddings=16384,
                                   tie_word_embeddings=True, pad_token_id=tk.pad_token_id,
                                   eos_token_id=tk.eos_token_id)
    model = transformers.Qwen2ForCausalLM(cfg)
    model.generation_config.pad_token_id = tk.pad_token_id
    model.generation_config.eos_token_id = tk.eos_token_id
    return model, tk, ids


def case_trl_grpo():
    """A real TRL GRPOTrainer (trl 1.16.0, torch on the CPU; .venv-trl, lane trainers)
    with environment_factory=kernelarena's, a tiny random model and tokenizer built here
    (tiny_chat_model: its tokens are whole submit tool calls of the baseline kernel or a
    wrong one), 8 generations per prompt, 2 training steps on host tasks against a real
    envserver: every rollout's episode reset and closed, tool calls evaluated (OK and
    INCORRECT), the rewards logged, 0 errors of the environment."""
    need("trl", "--trainers")
    import datasets
    from trl import GRPOConfig, GRPOTrainer
    from kernelarena.integrations.trl import KernelArenaTRLEnv, trl_rows
    start_stack()
    wait_ready_elsewhere()

    def call(src):
        return "<tool_call>\n" + json.dumps({"name": "submit", "arguments": {
            "path": "gelu.c", "content": src}}) + "\n</tool_call>"
    good, wrong = call(GELU), call(WRONG)
    model, tk, ids = tiny_chat_model([good, wrong])
    errors, calls = [], []

    class Env(KernelArenaTRLEnv):
        def __init__(self):
            super().__init__(url=URL, max_steps=2, timeout_s=120)

        def submit(self, path: str, content: str) -> str:
            try:
                out = super().submit(path, content)
                calls.append(self.last_status)
                return out
            except Exception as e:  # noqa: BLE001 - counted, then TRL's {"error": ...}
                errors.append(f"{type(e).__name__}: {e}")
                raise
        submit.__doc__ = KernelArenaTRLEnv.submit.__doc__
    rows = trl_rows([prompts_row(71), prompts_row(72)], system_prompt="You write fast C.")
    args = GRPOConfig(
        output_dir=os.path.join(WORK, "grpo"), per_device_train_batch_size=8, num_generations=8,
        max_completion_length=2048, max_steps=2, learning_rate=1e-4, logging_steps=1,
        report_to="none", use_cpu=True, save_strategy="no", seed=0, bf16=False,
        max_tool_calling_iterations=2, shuffle_dataset=False, dataloader_num_workers=0,
        generation_kwargs={"suppress_tokens": [tk.unk_token_id, tk.pad_token_id,
                                               tk.convert_tokens_to_ids("<|im_start|>")]})
    trainer = GRPOTrainer(model=model, processing_class=tk, args=args,
                          train_dataset=datasets.Dataset.from_list(rows),
                          environment_factory=Env)
    t = time.monotonic()
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    print(f"     trained in {time.monotonic() - t:.1f} s; per step:",
          [{k: round(v, 3) for k, v in h.items() if k in ("reward", "reward_std",
                                                          "tools/call_frequency")} for h in logs])
    print("     tool calls", len(calls), {s: calls.count(s) for s in set(calls)},
          "errors", errors[:3])
    check(len(logs) == 2 and trainer.state.global_step == 2, "GRPOTrainer.train(): 2 steps logged")
    check(not [e for e in errors if "no steps left" not in e],
          f"0 errors of the environment (a call past max_steps aside): {errors[:3]}")
    check("OK" in calls and "INCORRECT" in calls,
          f"the model's tool calls were evaluated: OK and INCORRECT among {len(calls)}")
    c = kernelarena.Client(URL, timeout_s=30)
    eps = c.list_episodes()
    check(len(eps) == 16 and all(e.closed_at > 0 for e in eps) and
          {e.seed for e in eps} == {71, 72},
          f"16 rollouts (2 steps x 8 generations of seeds 71, 72), each its own episode, all "
          f"closed ({len(eps)})")
    fs = [h["tools/failure_frequency"] for h in logs]
    check(all(h["tools/call_frequency"] > 0 for h in logs) and
          len([e for e in errors]) == round(sum(f * h["tools/call_frequency"] * 8 for f, h in
                                                zip(fs, logs))),
          "TRL's tool failures are exactly the calls past max_steps")


def stub_model(replies):
    """An OpenAI-compatible chat-completions server on a free port, in a thread: the k-th
    request (from 0), with messages m, gets replies(k, m). Returns (base_url, the
    requests' message lists)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    seen, lock = [], threading.Lock()

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            with lock:
                k = len(seen)
                seen.append(req.get("messages", []))
            body = json.dumps({"id": f"stub-{k}", "object": "chat.completion", "created": 0,
                               "model": req.get("model", "stub"), "choices": [{
                                   "index": 0, "finish_reason": "stop", "message": {
                                       "role": "assistant", "content": replies(
                                           k, seen[k])}}],
                               "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                         "total_tokens": 2}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{srv.server_address[1]}/v1", seen


def case_verifiers():
    """verifiers: `vf-eval kernelarena-verifiers` (the v1 plugin: Taskset, Env and the
    in-process Harness of kernelarena.integrations.verifiers) on a one-row dataset of
    `envctl tasks --prompts`, a GRPO-shaped group (-r 8) against a stub OpenAI-compatible
    model: 0 errors, 7 OK and 1 INCORRECT, rewards in the traces, episodes closed; then
    a 2-turn group (a reply with no code block, then the kernel); a group of 8 with a
    server restart (kill -9) in its middle: none lost; a reply with no file on the last
    step: its feedback in the trace."""
    need("verifiers.v1", "--trainers")
    vf_eval = os.path.join(os.path.dirname(sys.executable), "vf-eval")
    check(os.access(vf_eval, os.X_OK), f"vf-eval is installed beside {sys.executable}")
    start_stack()
    wait_ready_elsewhere()
    prompts = os.path.join(WORK, "prompts.jsonl")
    with open(prompts, "w") as f:
        f.write(json.dumps(prompts_row(41)) + "\n")
    url, seen = stub_model(lambda k, m: reply(WRONG if k == 7 else GELU))

    def run(out, url, *extra):
        env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "clients", "python"),
                   KA_STUB_KEY="none", HOME=WORK)
        r = subprocess.run([vf_eval, "kernelarena-verifiers", "--env.taskset.url", URL,
                            "-m", "stub", "--client.base-url", url, "--client.api-key-var",
                            "KA_STUB_KEY", "--no-rich", "--no-push", "-o",
                            os.path.join(WORK, out), *extra], capture_output=True, text=True,
                           env=env, timeout=200)
        if r.returncode != 0:
            print(r.stdout[-3000:], r.stderr[-3000:])
        check(r.returncode == 0, f"vf-eval {' '.join(extra)} exits 0")
        import glob
        files = glob.glob(os.path.join(WORK, out, "*", "traces.jsonl"))
        eps = [json.loads(ln) for ln in open(files[0])] if files else []
        return eps
    eps = run("out1", url, "--env.taskset.prompts", prompts, "--env.taskset.timeout-s", "120", "-r", "8")
    traces = [e["traces"][0] for e in eps]
    rewards = [t["rewards"]["kernelarena"]["score"] for t in traces]
    sts = sorted(t["info"]["status"] for t in traces)
    print("     statuses", sts, "rewards", [round(r, 3) for r in rewards])
    check(len(eps) == 8 and all(e["ok"] and not e["errors"] for e in eps),
          "8 rollouts of one row: 0 errors")
    check(sts == ["INCORRECT"] + ["OK"] * 7 and sorted(rewards)[0] == 0.2 and
          min(sorted(rewards)[1:]) > 1.2, "7 OK (1.2 + speedup) and 1 INCORRECT (0.2)")
    check(len(seen) == 8 and len({json.dumps(m) for m in seen}) == 1 and
          seen[0][0]["role"] == "system" and "## How to reply" in seen[0][-1]["content"],
          "the model saw one prompt: the system prompt, then the task with its files and format")
    c = kernelarena.Client(URL, timeout_s=30)
    check(all(c.state(t["info"]["episode_id"]).closed for t in traces), "every episode is closed")
    # the second turn: the kernel once the feedback says nothing was evaluated
    url2, seen2 = stub_model(lambda k, m: reply(GELU) if "Nothing was evaluated" in
                             m[-1]["content"] else "No code, sorry.")
    eps = run("out2", url2, "--env.taskset.task-id", "host/gelu", "--env.taskset.seed", "5",
              "--env.taskset.max-steps", "2", "--env.taskset.timeout-s", "120", "-r", "2")
    traces = [e["traces"][0] for e in eps]
    check(len(eps) == 2 and all(e["ok"] for e in eps) and
          [t["info"]["turns"] for t in traces] == [2, 2] and
          all(t["info"]["status"] == "OK" and t["rewards"]["kernelarena"]["score"] > 1.2
              for t in traces), "2 turns: a reply with no code block, then the kernel: OK")
    check(len(seen2) == 4 and sum("Nothing was evaluated" in m[-1]["content"] for m in seen2) == 2
          and all(len(m) == 4 for m in seen2 if "Nothing was evaluated" in m[-1]["content"]),
          "the second turn: the conversation so far, the feedback last")
    check(all("Evaluation: OK" in t["info"]["feedback"] for t in traces),
          "the trace's info has the last step's feedback")
    # a server restart (kill -9) in the middle of a group of 8: the model's 4th answer
    # comes after it (the others race it); no rollout lost, the lost episodes replayed
    restarted = []

    def restart_reply(k, m):
        if k == 3:
            restarted.append(kill_and_restart())
        return reply(GELU)
    url4, _ = stub_model(restart_reply)
    eps = run("out4", url4, "--env.taskset.prompts", prompts, "--env.taskset.timeout-s", "120",
              "-r", "8")
    restarted[0].join()
    traces = [e["traces"][0] for e in eps]
    print("     across the restart: statuses", [t["info"]["status"] for t in traces],
          "episodes", len({t["info"]["episode_id"] for t in traces}))
    check(len(eps) == 8 and all(e["ok"] and not e["errors"] for e in eps) and
          all(t["info"]["status"] == "OK" and t["rewards"]["kernelarena"]["score"] > 1.2
              for t in traces), "a server restart in the middle of -r 8: 0 errors, 8 OK")
    check(sum(t["info"].get("replays", 0) for t in traces) >= 1,
          "the rollouts whose episode was lost were replayed (info replays)")
    # a reply with no file on the last (only) step: its feedback is in the trace
    url3, _ = stub_model(lambda k, m: "No code, sorry.")
    eps = run("out3", url3, "--env.taskset.task-id", "host/gelu", "--env.taskset.seed", "5",
              "-r", "1")
    t = eps[0]["traces"][0] if eps else {"info": {}}
    check(len(eps) == 1 and eps[0]["ok"] and t["info"].get("status") == "NO_FILES" and
          "no fenced code block" in t["info"].get("feedback", "") and
          "the episode is over" in t["info"]["feedback"],
          "no file on the last step: NO_FILES, its feedback in the trace's info")


def case_nemo_gym():
    """NeMo-Gym: KernelArenaResourcesServer's app (SimpleResourcesServer.setup_webserver,
    built as NeMo-Gym's resources-server test template builds it) served by uvicorn;
    /seed_session, then a GRPO-shaped group of 8 POST /verify of one dataset row
    (nemo_gym_rows of `envctl tasks --prompts`) at once, with NeMo-Gym's own response
    model: 0 errors, 7 OK and 1 INCORRECT; a reply with no code block; /aggregate_metrics
    over the group; every episode closed; then 8 verifies with a server restart (kill -9)
    in their middle: none lost."""
    need("nemo_gym.base_resources_server", "--trainers")
    import concurrent.futures
    from unittest.mock import MagicMock
    import uvicorn
    from nemo_gym.openai_utils import NeMoGymResponse
    from nemo_gym.server_utils import ServerClient
    from kernelarena.integrations.nemo_gym import (KernelArenaResourcesServer,
                                                   KernelArenaResourcesServerConfig, nemo_gym_rows)
    start_stack()
    wait_ready_elsewhere()
    row = nemo_gym_rows([prompts_row(51)], system_prompt="You write fast C.")[0]
    check(row["responses_create_params"]["input"][-1]["content"].count("```c gelu.c") >= 1 and
          row["task_id"] == "host/gelu" and row["seed"] == 51, "nemo_gym_rows: the prompt, task_id, seed")
    port = free_port()
    cfg = KernelArenaResourcesServerConfig(host="127.0.0.1", port=port, entrypoint="",
                                           name="kernelarena", url=URL, timeout_s=120)
    server = KernelArenaResourcesServer(config=cfg, server_client=MagicMock(spec=ServerClient))
    app = server.setup_webserver()
    uv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=uv.run, daemon=True).start()
    base = f"http://127.0.0.1:{port}"
    end = time.time() + 30
    while not uv.started:
        if time.time() > end:
            check(False, "the resources server starts")
        time.sleep(0.1)
    check(http("POST", base + "/seed_session", {}) == {}, "POST /seed_session")

    def response(text):
        return NeMoGymResponse(
            id="resp_1", created_at=0, model="stub", object="response", parallel_tool_calls=False,
            tool_choice="auto", tools=[], output=[{"id": "msg_1", "type": "message", "role":
                                                   "assistant", "status": "completed",
                                                   "content": [{"type": "output_text", "text": text,
                                                                "annotations": []}]}]
        ).model_dump(mode="json")

    def verify(text):
        return http("POST", base + "/verify", {**row, "response": response(text)})
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        outs = list(pool.map(verify, [reply(WRONG if i == 7 else GELU) for i in range(8)]))
    sts = [o["status"] for o in outs]
    print("     statuses", sts, "rewards", [round(o["reward"], 3) for o in outs])
    check(sts == ["OK"] * 7 + ["INCORRECT"] and min(o["reward"] for o in outs[:7]) > 1.2 and
          outs[7]["reward"] == 0.2, "8 verifies at once: 0 errors, 7 OK (1.2 + speedup), 1 INCORRECT (0.2)")
    check(all(o["task_id"] == "host/gelu" and o["components"]["correct"] in (0.0, 1.0) and
              "Evaluation:" in o["feedback"] for o in outs), "each response: its row, components, feedback")
    none = verify("I would not change it.")
    check(none["status"] == "NO_FILES" and none["reward"] == 0.0 and
          "no fenced code block" in none["feedback"], "a reply with no code block: NO_FILES, 0")
    # each result stamped with its row's task and rollout index, as NeMo-Gym's rollout
    # collection does (nemo_gym/rollout_collection.py) before /aggregate_metrics
    agg = http("POST", base + "/aggregate_metrics", {"verify_responses": [
        {**o, "_ng_task_index": 0, "_ng_rollout_index": i} for i, o in enumerate(outs)]})
    print("     aggregate_metrics", json.dumps(agg)[:300])
    g = agg["group_level_metrics"][0]
    mean = sum(o["reward"] for o in outs) / 8
    check(g["min/reward"] == 0.2 and abs(g["mean/reward"] - mean) < 1e-9,
          f"POST /aggregate_metrics: the group's min 0.2 and mean {mean:.3f}")
    c = kernelarena.Client(URL, timeout_s=30)
    check(all(c.state(o["episode_id"]).closed for o in outs + [none] if o["episode_id"]) and
          len({o["episode_id"] for o in outs}) == 8, "every verify's episode is closed")
    # a server restart (kill -9) in the middle of a group of 8 verifies: once 4 episodes
    # are open with steps queued or running (NeMo-Gym runs the verifies on asyncio's
    # default thread pool: 6 at once on 2 cores, so 8 are never open together)
    killed = threading.Event()

    def killer():
        end = time.time() + 60
        while time.time() < end:
            try:
                h = c.health(timeout_s=2)
                if h.open_episodes >= 4 and h.queued_jobs + h.running_jobs >= 1:
                    break
            except KernelArenaError:
                pass
            time.sleep(0.05)
        kill_and_restart().join()
        killed.set()
    th = threading.Thread(target=killer)
    th.start()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        outs = list(pool.map(verify, [reply(GELU)] * 8))
    th.join()
    check(killed.is_set(), "the server was killed and restarted during the group")
    print("     across the restart: statuses", [o["status"] for o in outs], "replays",
          [o["replays"] for o in outs])
    check(all(o["status"] == "OK" and o["reward"] > 1.2 for o in outs),
          "a server restart in the middle of 8 verifies: 0 errors, 8 OK")
    check(any(o["replays"] > 0 for o in outs), "the verifies whose episode was lost were replayed")
    uv.should_exit = True


def case_skyrl_restart():
    """A server restart (kill -9, same state folder) in the middle of a SkyRL group of 8
    (skyrl_gym.make("kernelarena"), on threads): no trajectory lost (the text layer
    replays a lost episode in a new one of the same seed), 0 errors."""
    import concurrent.futures
    import skyrl_gym
    import kernelarena.integrations.skyrl  # noqa: F401 - registers "kernelarena"
    start_stack()
    wait_ready_elsewhere()
    c = kernelarena.Client(URL, timeout_s=120)
    killed = threading.Event()

    def killer():
        end, seen = time.time() + 60, False
        while time.time() < end:
            try:
                h = c.health(timeout_s=2)
                seen = seen or h.open_episodes >= 8
                if seen and h.queued_jobs + h.running_jobs >= 1 and h.open_episodes <= 6:
                    break
            except KernelArenaError:
                pass
            time.sleep(0.05)
        PROCS["server"].kill()
        PROCS["server"].wait()
        killed.set()
        time.sleep(0.5)
        start_server()
    cfg = {"url": URL, "max_steps": 1, "timeout_s": 120}

    def trajectory(i):
        env = skyrl_gym.make("kernelarena", env_config=cfg, extras={"task_id": "host/gelu",
                                                                     "seed": 61})
        try:
            env.init([])
            out = env.step(reply(GELU))
            return (out["metadata"]["status"], out["reward"], env.episode.replays,
                    out["metadata"])
        finally:
            env.close()
    th = threading.Thread(target=killer)
    th.start()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futs = [pool.submit(trajectory, i) for i in range(8)]
        res, errs = [], []
        for f in futs:
            try:
                res.append(f.result())
            except Exception as e:  # noqa: BLE001 - counted: the check names them
                errs.append(f"{type(e).__name__}: {e}")
    th.join()
    check(killed.is_set(), "the server was killed and restarted during the group")
    print("     (status, reward, replays)", [(s, round(r, 3), n) for s, r, n, _ in res])
    for s, _, _, meta in res:  # why a trajectory was not OK (a FLAGGED one's reason)
        if s != "OK":
            print("     not OK:", str(meta)[:600])
    check(not errs and [r[0] for r in res] == ["OK"] * 8 and all(r[1] > 1.2 for r in res),
          f"8 trajectories across the restart: 0 errors {errs}")
    check(any(r[2] > 0 for r in res), "the trajectories whose episode was lost were replayed")


def case_reproducible():
    os.makedirs(STATE, exist_ok=True)
    token = "t0k3n-for-the-test"
    with open(os.path.join(STATE, "admin.token"), "w") as f:
        f.write(token + "\n")
    start_stack()
    wait_ready_elsewhere()
    c = kernelarena.Client(URL, timeout_s=120)
    # erff instead of erf: correct within the tolerance, but its error depends on the inputs
    approx = {"gelu.c": GELU.replace("erf(", "erff(")}

    def errs(**kw):
        r = c.evaluate("host/gelu", files=approx, seed=42, **kw)
        return [(x.name, x.max_abs_err, x.mismatches) for x in r.observation.cases], r

    try:
        c.evaluate("host/gelu", files=approx, seed=42, reproducible=True)
        check(False, "a reproducible Evaluate without the token was run")
    except KernelArenaError as e:
        check(e.code == "PERMISSION_DENIED" and "reproducible" in e.message,
              f"without the admin token: {e.code}: {e.message}")
    rep1, r = errs(reproducible=True, admin_token=token)
    check(dict(r.info).get("reproducible") == "true" and all(e[1] > 0 for e in rep1),
          f"reproducible Evaluate ran, info says so; errors {rep1}")
    plain1, _ = errs()
    # an episode's step, then its re-evaluation (Evaluate episode_id + step) on the same
    # executor: the correctness trial sees the inputs the episode's steps had
    ep = c.reset("host/gelu", seed=9).episode_id
    st = c.step(ep, 0, approx)
    ep_errs = [(x.name, x.max_abs_err) for x in st.observation.cases]
    rec = c.evaluate(episode_id=ep, step=1)
    rec_errs = [(x.name, x.max_abs_err) for x in rec.observation.cases]
    check(ep_errs == rec_errs and all(e[1] > 0 for e in ep_errs),
          f"a recorded step re-evaluated sees its episode's inputs: {ep_errs} == {rec_errs}")
    c.close(ep)
    envctl = os.path.join(BIN, "envctl")
    r = subprocess.run([envctl, "replay", "--server", URL, ep, "--reproducible"],
                       capture_output=True, text=True, env=dict(os.environ, KA_ADMIN_TOKEN=token))
    check(r.returncode == 0 and "OK" in r.stdout, f"envctl replay --reproducible: {r.stdout.strip()[-200:]}")
    env_no = {k: v for k, v in os.environ.items() if k != "KA_ADMIN_TOKEN"}
    r = subprocess.run([envctl, "replay", "--server", URL, ep, "--reproducible"],
                       capture_output=True, text=True, env=env_no)
    check(r.returncode == 2 and "needs the admin token" in r.stderr,
          f"envctl replay --reproducible without a token: rc {r.returncode}, {r.stderr.strip()}")
    # a new executor process: new secrets
    PROCS["gpuexec"].terminate()
    PROCS["gpuexec"].wait(30)
    log = open(os.path.join(WORK, "gpuexec.log"), "a")
    PROCS["gpuexec"] = subprocess.Popen(
        [os.path.join(BIN, "gpuexec"), "--server", f"ipc://{STATE}/exec.ipc", "--tasks", TASKS,
         "--backends", "host"], stderr=log, stdout=log,
        env=dict(os.environ, TMPDIR=os.path.join(WORK, "tmp")))
    wait_ready_elsewhere()
    rep2, _ = errs(reproducible=True, admin_token=token)
    plain2, _ = errs()
    check(rep1 == rep2, f"reproducible across an executor restart: {rep1} == {rep2}")
    check(plain1 != plain2, f"a plain Evaluate draws other inputs on a new executor: {plain1} vs {plain2}")


def main():
    global BIN, SRC, CASE, WORK, TASKS, STATE, URL, GELU, WRONG
    BIN, SRC, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    cases = {k[len("case_"):]: v for k, v in globals().items() if k.startswith("case_")}
    if CASE not in cases:
        print("unknown case; one of:", ", ".join(cases))
        sys.exit(2)
    WORK = tempfile.mkdtemp(prefix="ka-pyfault-")
    GELU = open(os.path.join(SRC, "tasks", "host", "gelu", "baseline", "gelu.c")).read()
    WRONG = GELU.replace("(0.5 * v", "(0.49 * v")  # compiles, every output is wrong
    TASKS = make_tasks()
    STATE = os.path.join(WORK, "state")
    URL = f"ipc://{STATE}/env.ipc"
    try:
        cases[CASE]()
        print(f"# {CASE}: all checks passed")
    finally:
        stop_all()


if __name__ == "__main__":
    main()
