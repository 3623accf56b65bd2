"""ka_torch: kernelarena's trusted PyTorch process (docs/tasks.md, "PyTorch tasks";
docs/integrity.md, property 18).

Started by gpuexec (gpuexec/daemon/torchproc.h), never by a runner: it runs the task's
own model.py (the problem statement of a torch2cuda / torch2triton task, ours, never
the agent's), outside every candidate's process, on the job's device.

    python3 ka_torch.py [--lock-fds M,T]

Protocol: one JSON object per line on stdin, one reply per line on stdout (nothing else
is written to stdout; Python's own messages go to stderr). Every reply has "ok"; a
failed one has "code" (unavailable | invalid | device | internal) and "error".

  {"op": "hello", "device": "cuda"|"cpu"}
      -> {"ok": true, "torch": "2.11.0", "cuda": "13.0", "device_name": "NVIDIA H200",
          "python": "3.12.3"}
         torch absent: {"ok": false, "code": "unavailable", "error": "torch is absent ..."}
  {"op": "load", "model": PATH, "inputs": [T...], "outputs": [T...]}
      T = {"name", "dtype" (f32 f64 f16 bf16 i8 u8 i32 i64), "shape": [ints],
           "init": {"dist": normal|uniform|randint, "a": number, "b": number}}
      -> {"ok": true}
  {"op": "reference", "dir": DIR}
      reads DIR/in<i>.bin (input i, its dtype, raw, row-major), runs Model in float64
      (every floating input widened to float64; a Model has no parameters or buffers of
      its own, its weights are task inputs, refused at load otherwise; integer
      inputs as they are), writes DIR/out<j>.bin (output j as float64, raw: the
      reference ABI of docs/tasks.md)
      -> {"ok": true, "precision": "float64"} (or "float32" where an op has no float64
         kernel on the device: the reply says so, the caller decides)
  {"op": "time", "mode": "eager"|"compile", "calls": N, "warmup": W, "seed": S}
      W untimed calls, then N timed calls of Model on inputs of the task's dtypes drawn
      by their init (torch's generator seeded with S, drawn anew every call), each:
      the device lock exclusive (--lock-fds: the lock of gpuexec/runner/devlock.h, the
      one a runner holds around its own flushed calls), the L2 flushed (twice its size
      written), CUDA events around the call alone, the lock released
      -> {"ok": true, "ms": [N floats], "compile_s": seconds (mode compile: the first
          call's compile)}
  {"op": "quit"} -> exits 0
"""
import ctypes
import fcntl
import importlib.util
import json
import os
import sys
import time
import traceback

try:
    import torch
    TORCH_ERROR = None
except Exception as e:  # absent or broken: every request is answered "unavailable"
    torch = None
    TORCH_ERROR = f"{type(e).__name__}: {e}"

DTYPES = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16",
          "i8": "int8", "u8": "uint8", "i32": "int32", "i64": "int64"}


class Fail(Exception):
    def __init__(self, code, error):
        super().__init__(error)
        self.code, self.error = code, error


class DevLock:
    """The device lock of gpuexec/runner/devlock.h: M (main) and T (turnstile), flock
    on open file descriptions of our own (reopened through /proc/self/fd)."""

    def __init__(self, spec):
        self.m = self.t = None
        if spec:
            m, t = (int(v) for v in spec.split(","))
            self.m = os.open(f"/proc/self/fd/{m}", os.O_RDWR | os.O_CLOEXEC)
            self.t = os.open(f"/proc/self/fd/{t}", os.O_RDWR | os.O_CLOEXEC)
            os.close(m)
            os.close(t)

    def exclusive(self):
        if self.m is None:
            return
        fcntl.flock(self.t, fcntl.LOCK_EX)
        try:
            fcntl.flock(self.m, fcntl.LOCK_EX)
        finally:
            fcntl.flock(self.t, fcntl.LOCK_UN)

    def release(self):
        if self.m is not None:
            fcntl.flock(self.m, fcntl.LOCK_UN)


class Session:
    def __init__(self, lock):
        self.lock = lock
        self.device = "cuda"
        self.model = None
        self.inputs = self.outputs = None
        self.flush = None

    def need_torch(self):
        if torch is None:
            raise Fail("unavailable", f"torch is absent from {sys.executable}: {TORCH_ERROR}")

    def hello(self, req):
        self.need_torch()
        self.device = req.get("device", "cuda")
        if self.device not in ("cuda", "cpu"):
            raise Fail("invalid", f"device must be cuda or cpu, not {self.device!r}")
        if self.device == "cuda" and not torch.cuda.is_available():
            raise Fail("unavailable", f"torch {torch.__version__} sees no CUDA device")
        name = torch.cuda.get_device_name(0) if self.device == "cuda" else "cpu"
        return {"torch": torch.__version__, "cuda": torch.version.cuda or "",
                "device_name": name, "python": sys.version.split()[0]}

    def load(self, req):
        self.need_torch()
        path = req["model"]
        spec = importlib.util.spec_from_file_location("ka_task_model", path)
        if spec is None:
            raise Fail("invalid", f"{path}: not a Python module")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        if not hasattr(mod, "Model"):
            raise Fail("invalid", f"{path}: no class Model")
        for t in req["inputs"] + req["outputs"]:
            if t["dtype"] not in DTYPES:
                raise Fail("invalid", f"tensor {t['name']}: unknown dtype {t['dtype']!r}")
        model = mod.Model().eval()
        if any(True for _ in model.parameters()) or any(True for _ in model.buffers()):
            raise Fail("invalid", f"{path}: Model has parameters or buffers of its own; "
                       "weights are task inputs (drawn by the executor)")
        self.model = model
        self.inputs, self.outputs = req["inputs"], req["outputs"]
        return {}

    def need_model(self):
        if self.model is None:
            raise Fail("invalid", "no model loaded (send load first)")

    def read_input(self, path, t):
        dt = getattr(torch, DTYPES[t["dtype"]])
        n = 1
        for d in t["shape"]:
            n *= d
        want = n * torch.empty((), dtype=dt).element_size()
        got = os.path.getsize(path)
        if got != want:
            raise Fail("invalid", f"{path}: {got} bytes, input {t['name']} needs {want}")
        raw = torch.from_file(path, shared=False, size=want, dtype=torch.uint8)
        return raw.view(dt).reshape(t["shape"])

    def results(self, out):
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(outs) != len(self.outputs):
            raise Fail("invalid", f"Model returned {len(outs)} tensors, the task has "
                       f"{len(self.outputs)} outputs")
        for o, t in zip(outs, self.outputs):
            if list(o.shape) != list(t["shape"]):
                raise Fail("invalid", f"output {t['name']}: Model gave shape {list(o.shape)}, "
                           f"the task says {t['shape']}")
        return outs

    def reference(self, req):
        self.need_torch()
        self.need_model()
        d = req["dir"]
        host = [self.read_input(os.path.join(d, f"in{i}.bin"), t)
                for i, t in enumerate(self.inputs)]
        precision = "float64"
        try:
            outs = self.run_reference(host, torch.float64)
        except (RuntimeError, NotImplementedError) as e:
            if "not implemented" not in str(e).lower():
                raise
            precision = "float32"
            outs = self.run_reference(host, torch.float32)
        for j, o in enumerate(outs):
            c = o.detach().to("cpu", torch.float64).contiguous()
            with open(os.path.join(d, f"out{j}.bin"), "wb") as f:
                f.write(ctypes.string_at(c.data_ptr(), c.numel() * 8))
        return {"precision": precision}

    def run_reference(self, host, dt):
        model = self.model
        args = [(h.to(self.device).to(dt) if h.is_floating_point() else h.to(self.device))
                for h in host]
        with torch.no_grad():
            outs = self.results(model(*args))
        if self.device == "cuda":
            torch.cuda.synchronize()
        return outs

    def draw(self, gen):
        xs = []
        for t in self.inputs:
            dt = getattr(torch, DTYPES[t["dtype"]])
            init = t.get("init") or {"dist": "normal", "a": 0.0, "b": 1.0}
            a, b = float(init.get("a", 0)), float(init.get("b", 1))
            if init["dist"] == "randint":
                x = torch.randint(int(a), int(b) + 1, t["shape"], generator=gen,
                                  device=self.device, dtype=torch.int64).to(dt)
            elif init["dist"] == "uniform":
                x = (torch.rand(t["shape"], generator=gen, device=self.device) * (b - a) + a).to(dt)
            else:
                x = (torch.randn(t["shape"], generator=gen, device=self.device) * b + a).to(dt)
            xs.append(x)
        return xs

    def flush_bytes(self):
        if self.device != "cuda":
            return 0
        l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or (64 << 20)
        return 2 * l2

    def time(self, req):
        self.need_torch()
        self.need_model()
        if self.device != "cuda":
            raise Fail("invalid", "time needs device cuda (CUDA events)")
        mode, calls, warmup = req.get("mode", "eager"), int(req["calls"]), int(req.get("warmup", 1))
        if mode not in ("eager", "compile") or calls < 1 or warmup < 0:
            raise Fail("invalid", f"time: mode {mode!r}, calls {calls}, warmup {warmup}")
        fn = self.model  # no parameters of its own (load): runs in the inputs' dtypes
        compile_s = 0.0
        if mode == "compile":
            fn = torch.compile(self.model)
        if self.flush is None:
            self.flush = torch.empty(self.flush_bytes(), dtype=torch.uint8, device="cuda")
        gen = torch.Generator(device="cuda")
        gen.manual_seed(int(req.get("seed", 1)))
        ms = []
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.no_grad():
            for q in range(warmup + calls):
                xs = self.draw(gen)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                self.lock.exclusive()
                try:
                    self.flush.fill_(q & 0xFF)
                    torch.cuda.synchronize()
                    begin.record()
                    fn(*xs)
                    end.record()
                    end.synchronize()
                finally:
                    self.lock.release()
                if mode == "compile" and q == 0:
                    compile_s = time.perf_counter() - t0
                if q >= warmup:
                    ms.append(begin.elapsed_time(end))
        return {"ms": ms, "compile_s": compile_s}


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def serve(sess):
    ops = {"hello": sess.hello, "load": sess.load, "reference": sess.reference,
           "time": sess.time}
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            if not isinstance(req, dict) or "op" not in req:
                raise Fail("invalid", "a request is a JSON object with an op")
            if req["op"] == "quit":
                reply({"ok": True})
                return 0
            if req["op"] not in ops:
                raise Fail("invalid", f"unknown op {req['op']!r}")
            out = ops[req["op"]](req)
            out["ok"] = True
            reply(out)
        except Fail as f:
            reply({"ok": False, "code": f.code, "error": f.error})
        except (ValueError, KeyError, TypeError) as e:
            reply({"ok": False, "code": "invalid", "error": f"{type(e).__name__}: {e}"})
        except Exception as e:  # torch's errors (a CUDA fault, out of memory): the device's
            traceback.print_exc(file=sys.stderr)
            code = "device" if torch is not None and isinstance(e, RuntimeError) else "internal"
            reply({"ok": False, "code": code, "error": f"{type(e).__name__}: {e}"[:2000]})
    return 0


def main(argv):
    spec = None
    if len(argv) == 3 and argv[1] == "--lock-fds":
        spec = argv[2]
    elif len(argv) != 1:
        sys.stderr.write("usage: ka_torch.py [--lock-fds M,T]\n")
        return 2
    return serve(Session(DevLock(spec)))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
