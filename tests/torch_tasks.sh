#!/bin/sh
# The PyTorch task families (docs/tasks.md, "PyTorch tasks": torch2cuda, torch2triton) on
# a machine without torch or a GPU:
#   1. `envctl tasks` lists at least 10 of them, torch2cuda in language cuda and
#      torch2triton in language triton, rtc on cuda, level-1 ops and level-2 fusions both
#      there (at least 4 of each);
#   2. every model.py defines class Model(nn.Module) whose forward takes the task's inputs
#      in task.yaml's order, and the prompt shows model.py verbatim in a python block;
#   3. model.py is the problem, not the agent's: never editable, never in ListTasks' files;
#   4. the task's version covers model.py (a changed module is a changed task; the check
#      can fail: a copy with a changed model.py must get another version, the same copy
#      unchanged the same one);
#   5. an episode without a GPU is refused at reset naming the cuda device it needs;
#   6. envctl validate's torch checks (torch_model, torch_reference) PASS, FAIL and WARN
#      where they should, through the stand-in driver and a torch that cannot be imported.
# The torch-dependent checks run on the H200: tests/device/torch_h200.sh.
# usage: torch_tasks.sh BIN_DIR SOURCE_DIR
set -u
BIN=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
WORK=$(mktemp -d /tmp/ka-torch-tasks-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
fail=0
check() { # check DESCRIPTION COMMAND...
  desc=$1
  shift
  if "$@"; then echo "ok   - $desc"; else echo "FAIL - $desc"; fail=1; fi
}
"$BIN/envctl" tasks --tasks "$SRC/tasks" >"$WORK/tasks" 2>&1
rc=$?
grep '^torch2' "$WORK/tasks"
check "envctl tasks: exit 0" [ $rc -eq 0 ]
nc=$(grep -cE '^torch2cuda/[a-z0-9_]+ +torch2cuda +cuda +rtc +cuda ' "$WORK/tasks")
nt=$(grep -cE '^torch2triton/[a-z0-9_]+ +torch2triton +triton +rtc +cuda ' "$WORK/tasks")
nall=$(grep -c '^torch2' "$WORK/tasks")
check "envctl tasks: $nc torch2cuda (language cuda) + $nt torch2triton (language triton), at least 10, none other" \
  sh -c "[ $((nc + nt)) -ge 10 ] && [ $nc -ge 1 ] && [ $nt -ge 1 ] && [ $((nc + nt)) -eq $nall ]"
check "level-1 ops and level-2 fusions, at least 4 of each" \
  sh -c "[ \$(grep '^torch2' '$WORK/tasks' | grep -c 'level1') -ge 4 ] &&
         [ \$(grep '^torch2' '$WORK/tasks' | grep -c 'level2') -ge 4 ]"

"$BIN/envctl" tasks --tasks "$SRC/tasks" --prompts --all-tasks >"$WORK/prompts.jsonl" 2>"$WORK/prompts.err"
check "envctl tasks --prompts: exit 0" [ $? -eq 0 ]
python3 - "$SRC/tasks" "$WORK/prompts.jsonl" <<'PY'
import ast, glob, json, os, sys
import yaml
root, prompts = sys.argv[1], sys.argv[2]
rows = {}
for line in open(prompts):
    r = json.loads(line)
    rows[r["task_id"]] = r
bad = 0
def check(ok, what):
    global bad
    print(("ok   - " if ok else "FAIL - ") + what)
    bad += not ok
dirs = sorted(glob.glob(os.path.join(root, "torch2*", "*", "task.yaml")))
check(len(dirs) >= 10, f"{len(dirs)} task folders under torch2cuda/ and torch2triton/")
for y in dirs:
    d = os.path.dirname(y)
    tid = os.path.relpath(d, root)
    t = yaml.safe_load(open(y))
    src = open(os.path.join(d, "model.py")).read()
    tree = ast.parse(src)
    model = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"]
    fwd = [f for f in (model[0].body if model else []) if isinstance(f, ast.FunctionDef)
           and f.name == "forward"]
    args = [a.arg for a in fwd[0].args.args[1:]] if fwd else None
    want = [ts["name"] for ts in t["tensors"] if ts["role"] == "input"]
    base = model and any(ast.unparse(b) in ("nn.Module", "torch.nn.Module") for b in model[0].bases)
    check(bool(base) and args == want,
          f"{tid}: class Model(nn.Module), forward({', '.join(args or [])}) takes the inputs {want}")
    lang = {"torch2cuda": "cuda", "torch2triton": "triton"}[tid.split("/")[0]]
    check(t["language"] == lang and t["type"] == tid.split("/")[0] and t["mode"] == "rtc",
          f"{tid}: type {t['type']}, language {t['language']}, mode {t['mode']}")
    r = rows.get(tid)
    shown = r is not None and ("```python\n" + src.rstrip("\n") + "\n```") in r["prompt"]
    check(shown, f"{tid}: the prompt (ListTasks) shows model.py verbatim")
    files = r["files"] if r else {}
    check(r is not None and "model.py" not in files and "model.py" not in t["editable"]
          and sorted(files) == sorted(t["editable"]),
          f"{tid}: the files are the editable ones {sorted(files)}, never model.py")
sys.exit(1 if bad else 0)
PY
check "model.py, prompts and files of every torch task" [ $? -eq 0 ]

# 4. the version covers model.py
mkdir -p "$WORK/t/torch2cuda"
cp -r "$SRC/tasks/torch2cuda/gelu" "$WORK/t/torch2cuda/"
ver() { "$BIN/envctl" tasks --tasks "$WORK/t" --prompts --all-tasks 2>/dev/null |
  python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["version"])'; }
v0=$(ver)
v1=$(ver)
printf '# a changed module\n' >>"$WORK/t/torch2cuda/gelu/model.py"
v2=$(ver)
echo "versions: $v0 $v1 $v2"
check "the version of an unchanged copy is the same ($v0)" sh -c "[ -n '$v0' ] && [ '$v0' = '$v1' ]"
check "a changed model.py changes the task's version ($v2)" sh -c "[ -n '$v2' ] && [ '$v0' != '$v2' ]"

# 6. envctl validate's torch checks (tests/fixtures/torch/tasks/torch2cuda/scale2, y = 2x):
#    with the stand-in driver's right reference PASS, with its reference off by 1e-6 of
#    max|ref| FAIL (the check can fail), with torch absent a WARN that says so
F=$SRC/tests/fixtures/torch
vd() { "$BIN/envctl" validate --tasks "$F/tasks" torch2cuda/scale2 --seeds 2 --reps 3 --warmup 0 \
  --quiet >"$WORK/vd.$1" 2>&1; }
KA_TORCH_DRIVER=$F/fake_driver.py KA_FAKE_TORCH=ok vd ok
grep torch_ "$WORK/vd.ok"
check "validate: the module's reference equal to reference.c's: torch_reference PASS" \
  grep -q "PASS torch_reference .*equals reference.c" "$WORK/vd.ok"
check "validate: model.py shown in the prompt: torch_model PASS" grep -q "PASS torch_model" "$WORK/vd.ok"
KA_TORCH_DRIVER=$F/fake_driver.py KA_FAKE_TORCH=wrong vd wrong
rc=$?
grep torch_ "$WORK/vd.wrong"
check "validate: a reference off by 1e-6 of max|ref|: torch_reference FAIL, exit != 0" \
  sh -c "[ $rc -ne 0 ] && grep -q 'FAIL torch_reference .*differs from reference.c by 1e-06' '$WORK/vd.wrong'"
PYTHONPATH=$F/absent vd absent
grep torch_ "$WORK/vd.absent"
check "validate without torch: torch_reference WARNs that torch is absent (never silent)" \
  grep -q "WARN torch_reference .*torch is absent from .*not compared" "$WORK/vd.absent"

# 5. no GPU here: refused at reset, naming the device
cd "$WORK" || exit 1
TMPDIR="$WORK" "$BIN/envctl" episode --tasks "$SRC/tasks" --task torch2cuda/softmax >"$WORK/ep" 2>&1
rc=$?
cat "$WORK/ep"
check "episode of torch2cuda/softmax without a GPU: refused (exit != 0)" [ $rc -ne 0 ]
check "the refusal comes at reset and names the cuda device the task needs" \
  grep -q "reset: UNAVAILABLE: task torch2cuda/softmax needs a cuda device" "$WORK/ep"
check "no crash, no infrastructure error" sh -c "! grep -qiE 'INFRA_ERROR|segmentation|abort' '$WORK/ep'"
exit $fail
