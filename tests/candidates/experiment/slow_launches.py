"""The slow agent of tests/device/agents_h200.sh on GPU tasks: repeats the `launches:`
list of a launch plan (launch.yaml) PASSES times, so that the kernels run PASSES times
over. Every launch of the hip2hip tasks it is used on (gelu, softmax, layernorm, row_sum,
silu_mul) computes its outputs from the inputs alone, so the result is unchanged and the
kernel about PASSES times slower: the GPU counterpart of this folder's host candidates.
Text-level (the launch entries are copied line by line), so it needs no YAML package.

    python3 slow_launches.py launch.yaml [PASSES=3]"""
import sys

path = sys.argv[1]
passes = int(sys.argv[2]) if len(sys.argv) > 2 else 3
lines = open(path).read().splitlines()
start = next(i for i, l in enumerate(lines) if l.rstrip() == "launches:") + 1
end = start
while end < len(lines) and (lines[end].startswith(" ") or not lines[end].strip()):
    end += 1
body = lines[start:end]
assert any(l.lstrip().startswith("- kernel:") for l in body), "no launch entries in " + path
open(path, "w").write("\n".join(lines[:start] + body * passes + lines[end:]) + "\n")
