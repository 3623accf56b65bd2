"""Python client test: a real envserver + gpuexec (host backend) and the kernelarena
package: Client methods, refusals that change nothing, kernelarena.Env under Gymnasium's
own environment checker, the async batch interface (a GRPO group) and evaluate().

    python3 tests/python_client_test.py BIN_DIR SOURCE_DIR

Exits 0 when every check passes; prints each check.
"""

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BIN, SRC = sys.argv[1], sys.argv[2]
# SIGTERM (ctest's timeout, a stopped run) unwinds like SIGINT: the finally below stops
# the envserver and gpuexec this test started
signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
sys.path.insert(0, os.path.join(SRC, "clients", "python"))

import gymnasium  # noqa: E402
from gymnasium.utils.env_checker import check_env  # noqa: E402

import kernelarena  # noqa: E402
from kernelarena import KernelArenaError  # noqa: E402


def check(cond, what):
    if not cond:
        print("FAIL -", what)
        sys.exit(1)
    print(f"ok   - [{time.monotonic() - T0:5.1f} s] {what}", flush=True)


def expect_error(code, fn, *a, **kw):
    try:
        fn(*a, **kw)
    except KernelArenaError as e:
        check(e.code == code, f"{code}: {e.message}")
        return e
    check(False, f"expected {code}")


T0 = time.monotonic()


def check_generated_code_is_current():
    """The checked-in kernelarena_pb2.py must describe proto/kernelarena.proto as it is
    now (protoc-c, a build requirement, writes the descriptor to compare)."""
    from google.protobuf import descriptor_pb2

    ds = os.path.join(tempfile.mkdtemp(prefix="ka-pyds-"), "ds.pb")
    subprocess.run(["protoc-c", "--descriptor_set_out=" + ds, "-I" + os.path.join(SRC, "proto"),
                    os.path.join(SRC, "proto", "kernelarena.proto")], check=True)
    fds = descriptor_pb2.FileDescriptorSet()
    fds.ParseFromString(open(ds, "rb").read())
    shutil.rmtree(os.path.dirname(ds))
    want = fds.file[0]
    have = descriptor_pb2.FileDescriptorProto()
    have.ParseFromString(kernelarena.pb.DESCRIPTOR.serialized_pb)

    def strip(fd):
        fd.ClearField("source_code_info")
        stack = list(fd.message_type)
        while stack:
            m = stack.pop()
            for f in m.field:
                f.ClearField("json_name")
            stack.extend(m.nested_type)
        return fd

    check(strip(want) == strip(have), "kernelarena_pb2.py matches proto/kernelarena.proto "
          "(else run scripts/gen-python-proto.sh)")
    import google.protobuf
    print("     protobuf runtime", google.protobuf.__version__)


check_generated_code_is_current()
work = tempfile.mkdtemp(prefix="ka-pytest-")
procs = []
try:
    tasks = os.path.join(work, "tasks")
    os.makedirs(os.path.join(tasks, "host"))
    shutil.copytree(os.path.join(SRC, "tasks", "host", "gelu"), os.path.join(tasks, "host", "gelu"))
    # A generous evaluation limit: a timed baseline on a loaded 2-core CI machine must
    # not turn into TIMEOUT. The test profile: cases 16x smaller (the client is under
    # test, not the kernel's speed).
    ty = os.path.join(tasks, "host", "gelu", "task.yaml")
    with open(ty) as f:
        y = f.read()
    y = y.replace("n: 1048576}", "n: 65536}").replace("n: 2097152}", "n: 131072}")
    y = y.replace("n: 1000003}", "n: 65537}")
    with open(ty, "w") as f:
        f.write("\n".join("timeout_s: 300" if ln.startswith("timeout_s:") else ln
                          for ln in y.split("\n")))
    state = os.path.join(work, "state")
    with open(os.path.join(work, "token"), "w") as f:
        f.write("py-admin\n")
    log = open(os.path.join(work, "server.log"), "w")
    procs.append(subprocess.Popen([os.path.join(BIN, "envserver"), "--state", state, "--tasks",
                                   tasks, "--admin-token-file", os.path.join(work, "token")],
                                  stderr=log))
    procs.append(subprocess.Popen([os.path.join(BIN, "gpuexec"), "--server",
                                   f"ipc://{state}/exec.ipc", "--tasks", tasks, "--backends",
                                   "host"], stderr=log))
    url = f"ipc://{state}/env.ipc"
    baseline = open(os.path.join(tasks, "host/gelu/baseline/gelu.c")).read()
    # A wrong candidate (INCORRECT, reward 20) is evaluated without timing: fast on a
    # loaded CI machine; the baseline (OK, timed) is evaluated once, by Env.step.
    wrong = open(os.path.join(SRC, "tests/candidates/host_gelu/wrong.c")).read()

    with kernelarena.Client(url, timeout_s=120) as c:
        c.wait_ready(60)
        d = c.describe()
        check(d.protocol_version == "kernelarena.v1" and d.held_out_scoring, "describe")
        check(any(t.id == "host/gelu" for t in c.list_tasks()), "list_tasks")

        r = c.reset("host/gelu", seed=3, options={"max_steps": 2, "run": "py"})
        ep = r.episode_id
        check(r.seed == 3 and r.observation.step == 0, "reset")
        expect_error("INVALID_ARGUMENT", c.step, ep, 0, {"other.c": "x"})
        expect_error("FAILED_PRECONDITION", c.step, ep, 1, {"gelu.c": baseline})
        expect_error("NOT_FOUND", c.step, "ep-0000000000000000", 0, {"gelu.c": "x"})
        st = c.state(ep)
        check(st.step == 0 and st.inflight_step == 0 and not st.closed, "refusals changed nothing")
        s = c.step(ep, 0, {"gelu.c": wrong})
        check(s.observation.status == kernelarena.pb.INCORRECT and s.reward == 20,
              f"step reward {s.reward:.1f}")
        check(set(["compiled", "correct", "speedup_geomean", "status"]) <= set(s.reward_components),
              "reward components")
        expect_error("FAILED_PRECONDITION", c.step, ep, 0, {"gelu.c": wrong})
        check(c.state(ep).step == 1 and c.health().queued_jobs == 0, "duplicate step not evaluated")
        check(c.cancel(ep).cancelled is False, "cancel with nothing in flight")
        rec = c.get_episode(ep)
        check(rec.steps == 1 and rec.step_records[0].reward == s.reward and
              rec.step_records[0].files[0].content.decode() == wrong, "get_episode")
        check([e.id for e in c.list_episodes(run_id="py")] == [ep], "list_episodes")
        e = c.evaluate(episode_id=ep, step=1)
        check(e.observation.status == kernelarena.pb.INCORRECT and e.reward == 20 and
              all(not k.held_out for k in e.observation.cases), "evaluate a recorded step")
        expect_error("PERMISSION_DENIED", c.evaluate, episode_id=ep, include_held_out=True)
        e = c.evaluate("host/gelu", {"gelu.c": baseline}, seed=3, include_held_out=True,
                       admin_token="py-admin")
        held = [k for k in e.observation.cases if k.held_out]
        check(e.observation.status == kernelarena.pb.OK and len(held) == 1 and held[0].correct
              and e.reward_components["held_out_correct"] == 1.0 and
              e.reward_components["held_out_speedup_geomean"] > 0,
              f"held-out scoring with the token: {kernelarena.STATUS_NAMES[e.observation.status]}"
              f", {len(held)} held-out case(s) {e.observation.message[:200]}")
        check(c.close(ep) is True and c.close(ep) is False, "close is idempotent")

    ev = kernelarena.evaluate("host/gelu", {"gelu.c": "int broken("}, url=url, seed=9)
    check(ev.observation.status == kernelarena.pb.COMPILE_ERROR and ev.reward == 0 and ev.seed == 9,
          "kernelarena.evaluate of a broken file")

    # Gymnasium: registered, made, and passes its own checker.
    env = gymnasium.make("kernelarena/KernelArena-v0", task_id="host/gelu", url=url, max_steps=2,
                         run="gym", timeout_s=120)
    check(isinstance(env.unwrapped, gymnasium.Env) and env.unwrapped.spec.nondeterministic,
          "gymnasium.make")
    check_env(env.unwrapped)
    check(True, "gymnasium.utils.env_checker.check_env")
    env.close()
    with kernelarena.Env("host/gelu", url=url, max_steps=1, timeout_s=120) as env:
        obs, info = env.reset(seed=5)
        check(obs in env.observation_space and obs["files"]["gelu.c"] == baseline and
              info["seed"] == 5, "Env.reset")
        obs, rew, term, trunc, info = env.step({"gelu.c": baseline})
        check(obs in env.observation_space and rew > 120 and trunc and not term and
              info["reward_components"]["correct"] == 1.0,
              f"Env.step: {obs['status']} reward {rew:.1f} {obs['message'][:200]}")
        epid = env.episode_id
    check(env.episode_id is None, "context manager closed the episode")

    # Many episodes in flight from one process: a GRPO group.
    async def group():
        async with kernelarena.AsyncClient(url, timeout_s=300) as ac:
            return await kernelarena.rollouts(ac, "host/gelu", seed=7, n=4,
                                              policy=lambda ob, i: {"gelu.c": wrong if i == 1
                                                                    else "int broken("})
    ros = asyncio.run(group())
    rewards = [r.total_reward for r in ros]
    adv = kernelarena.group_advantages(rewards)
    check(len(ros) == 4 and all(r.error is None and len(r.rewards) == 1 for r in ros),
          "4 rollouts in flight")
    check(rewards == [0, 20, 0, 0], f"group rewards {rewards}")
    check(abs(sum(adv)) < 1e-6 and adv[1] > 0 and all(adv[i] < 0 for i in (0, 2, 3)),
          f"group advantages {[round(a, 3) for a in adv]}")
    with kernelarena.Client(url) as c:
        eps = c.list_episodes()
        check(len(set(r.episode_id for r in ros)) == 4 and c.health().open_episodes == 0,
              "every rollout closed, none lost")
    # envctl export / replay against the same server
    out = subprocess.run([os.path.join(BIN, "envctl"), "export", "--server", url, "--run", "py"],
                         capture_output=True, text=True, timeout=60)
    lines = [json.loads(x) for x in out.stdout.splitlines()]
    check(out.returncode == 0 and len(lines) == 1, "envctl export --run py: one JSON line")
    j = lines[0]
    check(j["id"] == ep and j["task"] == "host/gelu" and j["seed"] == 3 and j["env_version"] and
          j["task_version"] and len(j["steps"]) == 1 and j["steps"][0]["files"]["gelu.c"] == wrong
          and j["steps"][0]["reward"] == 20 and j["steps"][0]["observation"]["status"] == "INCORRECT"
          and j["steps"][0]["reward_components"]["correct"] == 0 and
          "wall_s" in j["steps"][0]["timing"] and j["steps"][0]["truncated"] is False,
          "export line contents")
    out = subprocess.run([os.path.join(BIN, "envctl"), "export", "--server", url, "--episode",
                          "ep-0000000000000000"], capture_output=True, text=True, timeout=60)
    check(out.returncode == 1 and out.stdout == "" and "NOT_FOUND" in out.stderr,
          "export of an unknown episode fails cleanly")
    out = subprocess.run([os.path.join(BIN, "envctl"), "replay", "--server", url, ep],
                         capture_output=True, text=True, timeout=300)
    print(out.stdout)
    check(out.returncode == 0 and "INCORRECT" in out.stdout and "+0.000" in out.stdout,
          "envctl replay: same status and reward")
    with kernelarena.Client(url) as c:
        check(c.get_episode(ep).steps == 1, "replay recorded nothing")
    print("python_client: all checks passed")
finally:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
    if os.environ.get("KA_KEEP_TMP"):
        print("kept", work)
    else:
        shutil.rmtree(work, ignore_errors=True)
