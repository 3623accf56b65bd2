"""kernelarena's trusted Triton compile driver (gpuexec/backends/triton.c runs it).

Usage: python3 triton_compile.py REQUEST.json OUTDIR

Runs in the compile sandbox (sandbox.h, ka_sandbox_compiler: no network, read-write only
in its folder, no GPU needed). It imports triton only (never torch), checks that the
submitted file holds nothing but imports of triton, constants and @triton.jit functions,
and for each compile unit of the request calls

    triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget("cuda", ARCH, 32))

writing OUTDIR/<unit>.cubin and one line per unit to OUTDIR/meta.txt:

    unit <id> name <symbol> shared <bytes> warps <n> ctas <n> scratch <bytes> <align>
         profile <bytes> coop <0|1> pdl <0|1>

(on one line). The request (written by triton.c):

    {"source": "kernels.py", "arch": 90,
     "units": [{"id": "u0", "kernel": "gelu", "args": ["*fp32", "*fp32", "i64"],
                "constexprs": {"BLOCK": 1024}, "num_warps": 4, "num_stages": 3}]}

args are the types of the kernel's parameters that are not constexprs, in order. Pointer
parameters get the divisibility-16 hint (the runner's buffers are 256-byte aligned).
A submission's error ends the process with status 1 and the reason (a traceback for
errors inside Triton) on stderr; triton.c shows its last lines as the verdict's feedback.
"""

import ast
import json
import os
import sys

ALLOWED_MODULES = ("triton", "triton.language", "math")


def fail(msg):
    sys.stderr.write("error: " + msg + "\n")
    sys.exit(1)


def is_jit(dec):
    """True for @triton.jit, @jit, @triton.jit(...), @jit(...)."""
    if isinstance(dec, ast.Call):
        dec = dec.func
    if isinstance(dec, ast.Name):
        return dec.id == "jit"
    return (isinstance(dec, ast.Attribute) and dec.attr == "jit" and isinstance(dec.value, ast.Name)
            and dec.value.id == "triton")


def is_constant(node):
    """A literal, a tuple of literals, or tl.constexpr(literal) / triton.language.constexpr(...)."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
        return True
    if isinstance(node, ast.Tuple):
        return all(is_constant(e) for e in node.elts)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "constexpr"
            and len(node.args) == 1 and not node.keywords):
        return is_constant(node.args[0])
    return False


def is_type_name(node):
    """An annotation that names a type: NAME or a dotted name (tl.constexpr, tl.tensor)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def is_literal(node):
    """A literal, or a list/tuple of literals (a decorator's do_not_specialize=["n"])."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return all(is_literal(e) for e in node.elts)
    return is_constant(node)


def check_def(where, node):
    """What Python evaluates when a def runs: its decorators' arguments, its parameters'
    defaults and annotations. Only literals and type names: the submission's code must
    not run here (red team 2026-12-01: a default of __import__("sys").exit(125) made the
    compile an unscored INFRA_ERROR)."""
    for d in node.decorator_list:
        if isinstance(d, ast.Call) and (d.args or not all(is_literal(k.value) for k in d.keywords)):
            fail(f"{where}: the arguments of '{node.name}''s decorator must be literal keywords")
    a = node.args
    for p in a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]:
        if p.annotation is not None and not is_type_name(p.annotation):
            fail(f"{where}: the annotation of parameter '{p.arg}' must name a type (tl.constexpr)")
    for dflt in a.defaults + [x for x in a.kw_defaults if x is not None]:
        if not is_constant(dflt):
            fail(f"{where}: parameter defaults of '{node.name}' must be literals")
    if node.returns is not None and not is_type_name(node.returns):
        fail(f"{where}: the return annotation of '{node.name}' must name a type")


# What a kernel body may not name: Triton's code generator calls plain Python functions it
# meets in a body, so getattr(triton.compiler.compiler.os, "system") or a builtin reached
# through __builtins__ ran the submission's Python at compile time (red team 2026-12-01:
# _posixsubprocess.fork_exec started a shell that no audit event saw). Kernels use
# triton.language (tl), a few triton helpers, math and their own @triton.jit functions.
_BODY_NAMES_REFUSED = frozenset((
    "getattr", "setattr", "delattr", "hasattr", "__import__", "eval", "exec", "compile",
    "globals", "locals", "vars", "open", "input", "breakpoint", "memoryview", "type", "object",
    "super", "classmethod", "staticmethod", "property", "dir", "help", "id", "exit", "quit"))
_TRITON_ATTRS = ("cdiv", "next_power_of_2", "jit", "constexpr")
_MODULE_NAMES = ("tl", "triton", "math")


def _public_values(mod):
    """The public members of mod that are not modules (what a kernel may name in it)."""
    import types
    return {n for n in dir(mod) if not n.startswith("_")
            and not isinstance(getattr(mod, n, None), types.ModuleType)}


_ALLOWED_CHAINS = None


def _allowed_chains():
    """Attribute chains a kernel body may use, as tuples after their root: of
    triton.language (tl) its public non-module members, tl.math.*, tl.extra.libdevice.*
    and tl.extra.cuda.libdevice.*; of triton cdiv, next_power_of_2, jit, constexpr and
    triton.language as tl; of math its functions and constants. Everything else, tl.core
    (a module holding builtins: red team 2026-12-01) among it, is refused."""
    global _ALLOWED_CHAINS
    if _ALLOWED_CHAINS is None:
        import math
        import triton.language as tlang
        tl = {(n,) for n in _public_values(tlang)}
        tl |= {("math", n) for n in _public_values(tlang.math)}
        # tl.extra.libdevice resolves per target when the kernel compiles (no attribute
        # to list): its names are CUDA's libdevice module's
        import importlib
        ld = importlib.import_module("triton.language.extra.cuda.libdevice")
        for path in (("extra", "libdevice"), ("extra", "cuda", "libdevice")):
            tl |= {path + (n,) for n in _public_values(ld)}
        _ALLOWED_CHAINS = {
            "tl": tl,
            "triton": {(n,) for n in _TRITON_ATTRS} | {("language",) + c for c in tl},
            "math": {(n,) for n in _public_values(math)},
        }
    return _ALLOWED_CHAINS


def check_body(where, node):
    """A @triton.jit body: no builtin that reaches arbitrary objects (_BODY_NAMES_REFUSED),
    no attribute starting with "_", tl, triton and math only as the roots of the chains
    _allowed_chains() lists (never as values of their own), and of any other value no
    attribute that names a module there (core, builtins, os, sys, ...)."""
    parents = {}
    for sub in ast.walk(node):
        for child in ast.iter_child_nodes(sub):
            parents[child] = sub
    chains = _allowed_chains()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in _BODY_NAMES_REFUSED:
            fail(f"{where}: '{sub.id}' is not allowed in the triton compile (kernel '{node.name}')")
        if isinstance(sub, ast.Name) and sub.id in _MODULE_NAMES and sub is not node:
            up = parents.get(sub)
            if not (isinstance(up, ast.Attribute) and up.value is sub):
                fail(f"{where}: '{sub.id}' as a value is not allowed in the triton compile "
                     f"(kernel '{node.name}': name its members)")
        if not isinstance(sub, ast.Attribute):
            continue
        if sub.attr.startswith("_"):
            fail(f"{where}: attribute '{sub.attr}' is not allowed in the triton compile "
                 f"(kernel '{node.name}')")
        if isinstance(parents.get(sub), ast.Attribute) and parents[sub].value is sub:
            continue  # the outermost attribute of a chain checks the whole chain
        chain, v = [], sub
        while isinstance(v, ast.Attribute):
            chain.append(v.attr)
            v = v.value
        chain.reverse()
        root = v.id if isinstance(v, ast.Name) else None
        if root in chains:
            if tuple(chain) not in chains[root]:
                fail(f"{where}: {root}.{'.'.join(chain)} is not allowed in the triton compile "
                     f"(kernel '{node.name}': triton.language, tl.math, tl.extra.libdevice)")
        elif any(a in _MODULE_ATTRS for a in chain):
            fail(f"{where}: attribute '{next(a for a in chain if a in _MODULE_ATTRS)}' is not "
                 f"allowed in the triton compile (kernel '{node.name}')")


_MODULE_ATTRS = frozenset(("core", "builtins", "os", "sys", "subprocess", "compiler", "runtime",
                           "backends", "importlib", "language", "extra", "math", "semantic",
                           "standard", "random", "types", "ctypes", "shutil", "pathlib", "io"))


def check_source(path, text):
    """Top level: imports of triton (and math), constants, @triton.jit functions, docstrings."""
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as e:
        fail(f"{path}:{e.lineno}: syntax error: {e.msg}")
    for node in tree.body:
        where = f"{path}:{node.lineno}"
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name not in ALLOWED_MODULES:
                    fail(f"{where}: import of '{a.name}' (only triton, triton.language and math)")
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level or (mod not in ALLOWED_MODULES and not (mod == "triton" and all(
                    a.name in ("language", "jit", "cdiv", "next_power_of_2") for a in node.names))):
                fail(f"{where}: import from '{mod}' (only triton, triton.language and math)")
        elif isinstance(node, ast.FunctionDef):
            if not node.decorator_list or not all(is_jit(d) for d in node.decorator_list):
                fail(f"{where}: function '{node.name}' is not a @triton.jit kernel (no host code runs)")
            check_def(where, node)
            check_body(where, node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            if node.value is None or not is_constant(node.value):
                fail(f"{where}: only constants may be assigned at the top level")
            if isinstance(node, ast.AnnAssign) and not is_type_name(node.annotation):
                fail(f"{where}: a top-level annotation must name a type")
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if not all(isinstance(t, ast.Name) for t in targets):
                fail(f"{where}: only plain names may be assigned at the top level")
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            pass  # a docstring
        else:
            fail(f"{where}: {type(node).__name__} at the top level (only imports, constants and "
                 "@triton.jit functions)")


def load_kernels(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    check_source(os.path.basename(path), text)
    import types
    mod = types.ModuleType("ka_submission")
    mod.__file__ = path
    sys.modules["ka_submission"] = mod
    exec(compile(text, path, "exec"), mod.__dict__)  # definitions only (checked above)
    return mod


def unit_source(mod, unit):
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction
    name = unit["kernel"]
    fn = getattr(mod, name, None)
    if not isinstance(fn, JITFunction):
        fail(f"the launch plan names kernel '{name}', which the source does not define as @triton.jit")
    consts = dict(unit.get("constexprs", {}))
    for k in consts:
        if k not in fn.arg_names:
            fail(f"kernel '{name}' has no parameter '{k}' (constexprs of the launch plan); "
                 f"its parameters: {', '.join(fn.arg_names)}")
    for p in fn.params:
        if p.name not in consts and p.is_constexpr:
            if p.has_default:
                consts[p.name] = p.default
            else:
                fail(f"kernel '{name}': constexpr parameter '{p.name}' has no value in the launch "
                     "plan's constexprs")
    rest = [a for a in fn.arg_names if a not in consts]
    types_ = unit["args"]
    if len(rest) != len(types_):
        fail(f"kernel '{name}' takes {len(rest)} non-constexpr parameters ({', '.join(rest)}); "
             f"the launch plan passes {len(types_)} args")
    signature, attrs = {}, {}
    for i, a in enumerate(fn.arg_names):
        if a in consts:
            signature[a] = "constexpr"
        else:
            ty = types_[rest.index(a)]
            signature[a] = ty
            if ty.startswith("*"):
                attrs[(i, )] = [["tt.divisibility", 16]]
    return ASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs)


# Process creation and native code loading, refused from here on (sys.addaudithook,
# PEP 578: a hook cannot be removed) except Triton's own ptxas: Triton's code generator
# evaluates parts of a kernel's body in this process, and the red team (2026-12-01) ran
# getattr(triton.compiler.compiler.os, "system")(...) from one. The sandbox holds the
# rest (its folder only, no network); this keeps the submission from starting programs.
_REFUSED = ("os.system", "os.exec", "os.spawn", "os.fork", "os.forkpty", "os.kill", "os.killpg",
            "ctypes.dlopen", "pty.spawn")


_TRITON_DIR = ""  # triton's own folder (main, once triton is imported): its ptxas lives there


def _is_ptxas(path):
    """Triton's own ptxas: by its real path under triton's folder, not by a name a
    submission could give a link to /bin/sh (red team 2026-12-01)."""
    try:
        real = os.path.realpath(os.fsdecode(path or ""))
    except (TypeError, ValueError):
        return False
    return (bool(_TRITON_DIR) and real.startswith(_TRITON_DIR + os.sep)
            and os.path.basename(real).startswith("ptxas"))


# The task folders (KA_TRITON_DENY, set by gpuexec: the registry's root), never opened
# or listed from here: the submission's Python could read a hidden baseline
# (instruction2triton) there and raise it into the compile log (review 2026-12-01). The
# compile needs none of it: the source comes in request.json.
_DENY = os.environ.get("KA_TRITON_DENY", "")
_DENY = os.path.realpath(_DENY) if _DENY.startswith("/") else ""
_PATH_EVENTS = ("open", "os.listdir", "os.scandir", "os.chdir", "os.symlink", "os.link",
                "os.rename", "shutil.copyfile", "shutil.copytree", "glob.glob")


def _denied(path):
    if not _DENY or path is None or isinstance(path, int):
        return False
    try:
        p = os.path.realpath(os.fsdecode(path))
    except (TypeError, ValueError):
        return True  # a path it cannot read is refused rather than guessed at
    return p == _DENY or p.startswith(_DENY + os.sep)


def _audit(event, args):
    if event in _REFUSED:
        raise RuntimeError(f"{event} is not allowed in the triton compile")
    if event in _PATH_EVENTS and args and any(_denied(a) for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))):
        raise RuntimeError("the task folders are not readable in the triton compile")
    if event == "subprocess.Popen":
        exe, argv = args[0], args[1]
        first = argv[0] if isinstance(argv, (list, tuple)) and argv else argv
        if not _is_ptxas(exe if exe else first):
            raise RuntimeError("only ptxas may be started in the triton compile")
    if event == "os.posix_spawn" and not _is_ptxas(args[0]):
        raise RuntimeError("only ptxas may be started in the triton compile")


def main():
    if len(sys.argv) != 3:
        fail("usage: triton_compile.py REQUEST.json OUTDIR")
    with open(sys.argv[1], encoding="utf-8") as f:
        req = json.load(f)
    out = sys.argv[2]
    # never torch (the GPU machine has it): an import of it, by anyone, fails here
    for name in ("torch", "numpy"):
        sys.modules[name] = None
    import triton
    global _TRITON_DIR
    _TRITON_DIR = os.path.realpath(os.path.dirname(triton.__file__))
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    sys.addaudithook(_audit)
    mod = load_kernels(req["source"])
    target = GPUTarget("cuda", int(req["arch"]), 32)
    backend = make_backend(target)
    lines = []
    for unit in req["units"]:
        src = unit_source(mod, unit)
        opts = backend.parse_options({"num_warps": int(unit["num_warps"]), "num_stages": int(unit["num_stages"])})
        k = triton.compile(src, target=target, options=opts.__dict__)
        md = k.metadata
        with open(os.path.join(out, unit["id"] + ".cubin"), "wb") as f:
            f.write(k.asm["cubin"])
        lines.append(f"unit {unit['id']} name {md.name} shared {md.shared} warps {md.num_warps} "
                     f"ctas {getattr(md, 'num_ctas', 1)} scratch {getattr(md, 'global_scratch_size', 0)} "
                     f"{getattr(md, 'global_scratch_align', 1)} profile {getattr(md, 'profile_scratch_size', 0)} "
                     f"coop {int(bool(getattr(md, 'launch_cooperative_grid', False)))} "
                     f"pdl {int(bool(getattr(md, 'launch_pdl', False)))}\n")
    with open(os.path.join(out, "meta.txt"), "w", encoding="utf-8") as f:
        f.write(f"triton {triton.__version__}\n")
        f.writelines(lines)


if __name__ == "__main__":
    main()
