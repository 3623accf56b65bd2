"""The PyTorch task families on a GPU machine with torch (tests/device/torch_h200.sh runs
it; docs/tasks.md, "PyTorch tasks"). For every torch2cuda / torch2triton task:

  1. reference: inputs drawn by task.yaml's init on a small case (each size capped),
     the module's float64 output from the trusted process (gpuexec/torch/ka_torch.py,
     through its protocol) against the task's own double C reference (reference.c,
     compiled here with cc) on the same inputs: they must agree to 1e-9 of max|ref|;
  2. eager within the tolerance: the module run by PyTorch eager in the task's dtypes
     on the device, judged against the float64 reference by the task's own rule
     (|out - ref| <= atol * max|ref| + rtol * |ref|): the tolerance admits PyTorch's own
     result (a tolerance that failed it would be wrong);
  3. times, per shown case, through the trusted process: eager and torch.compile (on the
     first shown case unless --compile all: each new shape is a compile of its own), each
     call flushed and timed by CUDA events (the process's `time`), medians of --calls;
     beside them the baseline kernel's time from `envctl validate --json` reports
     (--validate-dir), and the baseline's speedup over eager (eager / baseline).
Prints one line per check, then a table: task, status, case, eager ms, compile ms,
baseline-kernel ms, speedup. Exit status 1 when any task FAILs.

usage: torch_check.py --driver build/bin/ka_torch.py --tasks tasks
                      [--validate-dir OUT/validate] [--calls 20] [--only ID,...]
                      [--compile first|all]
"""
import argparse
import ctypes
import glob
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile

import torch
import yaml

DT = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
      "i8": torch.int8, "u8": torch.uint8, "i32": torch.int32, "i64": torch.int64}


class Driver:
    """The trusted process, spoken to over its protocol."""

    def __init__(self, python, driver):
        self.p = subprocess.Popen([python, driver], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)

    def call(self, **req):
        self.p.stdin.write(json.dumps(req) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("the torch process exited")
        rep = json.loads(line)
        if not rep.get("ok"):
            raise RuntimeError(f"{req['op']}: {rep.get('code')}: {rep.get('error')}")
        return rep

    def close(self):
        try:
            self.call(op="quit")
        except Exception:
            pass
        self.p.wait(timeout=30)


def ev(expr, params):
    if isinstance(expr, (int, float)):
        return expr
    return int(eval(str(expr), {"__builtins__": {}}, dict(params)))


def specs(t, params):
    ins, outs = [], []
    for ts in t["tensors"]:
        o = {"name": ts["name"], "dtype": ts["dtype"],
             "shape": [ev(d, params) for d in ts["shape"]]}
        if ts["role"] == "input":
            i = ts["init"]
            a, b = ((i["mean"], i["std"]) if i["dist"] == "normal" else (i["low"], i["high"]))
            o["init"] = {"dist": i["dist"], "a": float(ev(a, params)), "b": float(ev(b, params))}
            ins.append(o)
        else:
            o["atol"] = ts.get("atol", t["tolerance"]["atol"])
            o["rtol"] = ts.get("rtol", t["tolerance"]["rtol"])
            outs.append(o)
    return ins, outs


def draw(spec, gen):
    i, shape, dt = spec["init"], spec["shape"], DT[spec["dtype"]]
    if i["dist"] == "randint":
        return torch.randint(int(i["a"]), int(i["b"]) + 1, shape, generator=gen).to(dt)
    if i["dist"] == "uniform":
        return (torch.rand(shape, generator=gen, dtype=torch.float64) * (i["b"] - i["a"]) + i["a"]).to(dt)
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * i["b"] + i["a"]).to(dt)


def c_reference(d, t, params, xs, outs, work):
    so = os.path.join(work, t["id"].replace("/", "_") + ".so")
    subprocess.run(["cc", "-std=gnu11", "-O2", "-fopenmp", "-shared", "-fPIC", "-o", so,
                    os.path.join(d, "reference.c"), "-lm"], check=True)
    fn = getattr(ctypes.CDLL(so), t["reference"]["symbol"])
    res = [torch.zeros(o["shape"], dtype=torch.float64) for o in outs]
    ptrs, k, r = [], 0, 0
    for ts in t["tensors"]:
        if ts["role"] == "input":
            ptrs.append(xs[k].data_ptr())
            k += 1
        else:
            ptrs.append(res[r].data_ptr())
            r += 1
    arr = (ctypes.c_void_p * len(ptrs))(*ptrs)
    pv = (ctypes.c_int64 * len(t["params"]))(*[params[p["name"]] for p in t["params"]])
    fn(arr, pv)
    return res


def worst(out, ref, atol, rtol):
    """max over elements of |out - ref| / (atol * max|ref| + rtol * |ref|); inf for NaN."""
    out, ref = out.double().cpu(), ref.double().cpu()
    allow = atol * ref.abs().max() + rtol * ref.abs()
    err = (out - ref).abs()
    if not torch.isfinite(out).all():
        return float("inf")
    return float((err / allow.clamp_min(1e-300)).max())


def check_task(d, t, drv, args, rows):
    tid = t["id"]
    status, notes = "PASS", []
    case = dict(t["held_out"][0] if t.get("held_out") else t["cases"][0])
    names = [p["name"] for p in t["params"]]
    cap = 100003 if len(names) == 1 else 1031
    small = {p: min(int(case[p]), cap) for p in names}
    ins, outs = specs(t, small)
    gen = torch.Generator().manual_seed(17)
    xs = [draw(s, gen) for s in ins]
    with tempfile.TemporaryDirectory() as work:
        drv.call(op="load", model=os.path.join(d, "model.py"), inputs=ins, outputs=outs)
        for k, x in enumerate(xs):
            x = x.contiguous()
            with open(os.path.join(work, f"in{k}.bin"), "wb") as f:
                f.write(ctypes.string_at(x.data_ptr(), x.numel() * x.element_size()))
        rep = drv.call(op="reference", dir=work)
        tref = []
        for j, o in enumerate(outs):
            n = 1
            for v in o["shape"]:
                n *= v
            tref.append(torch.from_file(os.path.join(work, f"out{j}.bin"), size=n,
                                        dtype=torch.float64).reshape(o["shape"]).clone())
        cref = c_reference(d, t, small, xs, outs, work)
    for j, o in enumerate(outs):
        scale = float(cref[j].abs().max()) or 1.0
        agree = float((tref[j] - cref[j]).abs().max()) / scale
        ok = agree <= 1e-9 and rep["precision"] == "float64"
        print(f"{'ok  ' if ok else 'FAIL'} {tid}: {o['name']} torch float64 vs reference.c on "
              f"{small}: max diff {agree:.2e} of max|ref| ({rep['precision']})")
        if not ok:
            status = "FAIL"
            notes.append("reference")
    spec = importlib.util.spec_from_file_location("m", os.path.join(d, "model.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        got = mod.Model()(*[x.cuda() for x in xs])
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    for j, o in enumerate(outs):
        w = worst(got[j], tref[j], o["atol"], o["rtol"])
        ok = w <= 1.0
        print(f"{'ok  ' if ok else 'FAIL'} {tid}: {o['name']} PyTorch eager ({o['dtype']}) within the "
              f"task's tolerance: worst {w:.3f} of the allowance")
        if not ok:
            status = "FAIL"
            notes.append("eager-tolerance")
    base = {}
    vf = os.path.join(args.validate_dir or "", tid.replace("/", "_") + ".json")
    if args.validate_dir and os.path.exists(vf):
        for b in json.load(open(vf))["tasks"][0].get("baseline_times", []):
            if b.get("backend") == "cuda":
                base[b["case"]] = b["baseline_ms"]
    for c in t["cases"]:
        p = {n: int(c[n]) for n in names}
        ci, co = specs(t, p)
        drv.call(op="load", model=os.path.join(d, "model.py"), inputs=ci, outputs=co)
        e = drv.call(op="time", mode="eager", calls=args.calls, warmup=3, seed=1)
        cms = "-"
        if args.compile == "all" or c is t["cases"][0]:
            try:
                k = drv.call(op="time", mode="compile", calls=args.calls, warmup=2, seed=1)
                cms = f"{statistics.median(k['ms']):.4f}"
                print(f"note {tid}: torch.compile of case {c['name']}: {k['compile_s']:.1f} s")
            except RuntimeError as ex:
                print(f"note {tid}: torch.compile: {ex}"[:300])
        ems = statistics.median(e["ms"])
        b = base.get(c["name"])
        sp = f"{ems / b:.2f}x" if b else "-"
        rows.append((tid, status + ("(" + ",".join(notes) + ")" if notes else ""), c["name"],
                     f"{ems:.4f}", cms, f"{b:.4f}" if b else "-", sp))
        print("row " + "  ".join(rows[-1]), flush=True)  # a run cut short keeps its rows
    return status == "PASS"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--tasks", default="tasks")
    ap.add_argument("--validate-dir")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--only", default="")
    ap.add_argument("--compile", choices=["first", "all"], default="first",
                    help="torch.compile's time on the first shown case (default) or on all")
    args = ap.parse_args()
    drv = Driver(sys.executable, args.driver)
    hello = drv.call(op="hello", device="cuda")
    print(f"torch {hello['torch']} (CUDA {hello['cuda']}) on {hello['device_name']}, "
          f"Python {hello['python']}")
    rows, ok = [], True
    only = [s for s in args.only.split(",") if s]
    for y in sorted(glob.glob(os.path.join(args.tasks, "torch2*", "*", "task.yaml"))):
        d = os.path.dirname(y)
        t = yaml.safe_load(open(y))
        if only and t["id"] not in only:
            continue
        try:
            ok &= check_task(d, t, drv, args, rows)
        except Exception as ex:  # one task's failure is its row, the others still run
            print(f"FAIL {t['id']}: {type(ex).__name__}: {ex}"[:400])
            rows.append((t["id"], "FAIL(error)", "-", "-", "-", "-", "-"))
            ok = False
    drv.close()
    hdr = ("TASK", "STATUS", "CASE", "EAGER_MS", "COMPILE_MS", "BASELINE_MS", "EAGER/BASE")
    w = [max(len(str(r[i])) for r in rows + [hdr]) for i in range(len(hdr))]
    print()
    for r in [hdr] + rows:
        print("  ".join(str(v).ljust(w[i]) for i, v in enumerate(r)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
