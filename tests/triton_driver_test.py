"""The triton compile driver's guards on their own (gpuexec/backends/triton_compile.py):
the audit hook refuses to open or list anything under KA_TRITON_DENY (the task folders:
a hidden instruction2triton baseline stays out of compile logs) and lets other paths
through, and starts no program but triton's own ptxas (by its real path); the body check
refuses the names and attribute chains a kernel body could reach arbitrary Python with.
Each case prints what it got (refused / allowed, or for _is_ptxas true / false).
Run with the Python that has triton: python3 tests/triton_driver_test.py DRIVER TASKS"""
import importlib.util
import os
import sys


def load(driver, deny):
    os.environ["KA_TRITON_DENY"] = deny
    spec = importlib.util.spec_from_file_location("ka_triton_driver", driver)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def refused(fn, *args):
    try:
        fn(*args)
    except (RuntimeError, SystemExit):
        return True
    return False


def main():
    driver, tasks = sys.argv[1], os.path.realpath(sys.argv[2])
    m = load(driver, tasks)
    hidden = os.path.join(tasks, "instruction2triton", "bias_gelu", "baseline", "kernels.py")
    bad = 0
    cases = [
        ("open of a hidden baseline", refused(m._audit, "open", (hidden, "r", 0)), True),
        ("listdir of the task root", refused(m._audit, "os.listdir", (tasks,)), True),
        ("scandir through a relative path", refused(m._audit, "os.scandir",
                                                     (os.path.relpath(tasks),)), True),
        ("open of a path outside", refused(m._audit, "open", ("/tmp/ka-x", "r", 0)), False),
        ("open of an fd", refused(m._audit, "open", (3, "r", 0)), False),
        ("a prefix that only looks alike", refused(m._audit, "open", (tasks + "-not", "r", 0)), False),
    ]
    for src, want in [("@triton.jit\ndef k(x):\n    getattr(x, 'y')\n", True),
                      ("@triton.jit\ndef k(x):\n    x.__class__\n", True),
                      ("@triton.jit\ndef k(x):\n    triton.compiler.compiler.os.system('true')\n", True),
                      # red team 2026-12-01: tl.core is a module holding builtins
                      ("@triton.jit\ndef k(x):\n    tl.core.builtins.getattr(tl.core.builtins, 'id')\n", True),
                      ("@triton.jit\ndef k(x):\n    m = tl\n", True),
                      ("@triton.jit\ndef k(x):\n    y = tl.extra.libdevice.core\n", True),
                      ("@triton.jit\ndef k(x):\n    x.builtins\n", True),
                      ("@triton.jit\ndef k(x):\n    tl.math.os\n", True),
                      ("@triton.jit\ndef k(x):\n    y = tl.extra.libdevice.pow(tl.load(x), 2.0) + tl.math.erf(1.0)\n", False),
                      ("@triton.jit\ndef k(x, B: tl.constexpr):\n    tl.store(x, tl.load(x) + triton.cdiv(B, 2))\n", False)]:
        cases.append((f"body check: {src.splitlines()[2].strip()}",
                      refused(m.check_source, "k.py", "import triton\nimport triton.language as tl\n" + src), want))
    # ptxas by its real path under triton's folder, not by a name (a link to /bin/sh)
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "triton", "bin"))
        real = os.path.join(d, "triton", "bin", "ptxas")
        open(real, "w").close()
        os.symlink("/bin/sh", os.path.join(d, "ptxas_sh"))
        m._TRITON_DIR = os.path.realpath(os.path.join(d, "triton"))
        cases += [("_is_ptxas: ptxas under triton's folder (true)", m._is_ptxas(real), True),
                  ("_is_ptxas: a link named ptxas_sh to /bin/sh (false)",
                   m._is_ptxas(os.path.join(d, "ptxas_sh")), False),
                  ("a Popen of the link", refused(m._audit, "subprocess.Popen",
                                                  (os.path.join(d, "ptxas_sh"), ["sh"], None, None)), True)]
    for name, got, want in cases:
        ok = got == want
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {'refused' if got else 'allowed'}")
    print(f"{len(cases) - bad} passed, {bad} failed")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
