"""The anchors of issue 15 on the GPU machine: one GELU evaluation (16M float32 elements)
by GPU MODE's pygpubench (do_bench_isolated: a fresh process, 100 timed repeats, a Triton
GELU) and by a KernelBench-style script (torch.utils.cpp_extension.load_inline of a CUDA
GELU in a fresh process, a correctness check against torch, 100 event-timed trials), each
timed with the host clock around the whole evaluation, as a user waits for it.

Needs torch and triton (on the GPU machine) and the pygpubench wheel (bench/README or the
device tool's wheel notes). Prints one line per anchor: name, seconds per evaluation.
  device run: python3 bench/anchors_gelu.py [--skip-load-inline]
"""
import os
import subprocess
import sys
import tempfile
import time

N = 16 * 1024 * 1024


def kernel_generator():
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        x = tl.load(x_ptr + i, mask=m)
        y = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
        tl.store(y_ptr + i, y, mask=m)

    def kernel(args):  # pygpubench calls kernel(inputs), inputs = (y, x)
        y, x = args
        n = x.numel()
        gelu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)

    return kernel


def test_generator(args, seed):
    import torch

    (n,) = args
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(n, device="cuda", generator=g)
    y = torch.empty_like(x)
    expected = torch.nn.functional.gelu(x)
    return (y, x), (expected, 1e-5, 1e-5)


def pygpubench_once():
    import pygpubench

    res = pygpubench.do_bench_isolated(kernel_generator, test_generator, (N,), 100, 5)
    return res.errors


LOAD_INLINE = r"""
import sys, time, torch
from torch.utils.cpp_extension import load_inline
src = '''
#include <torch/extension.h>
__global__ void gelu_k(const float *x, float *y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) { float v = x[i]; y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678f)); }
}
torch::Tensor gelu(torch::Tensor x) {
  auto y = torch::empty_like(x);
  long n = x.numel();
  gelu_k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
'''
m = load_inline(name="kb_gelu_" + str(int(time.time() * 1000)), cpp_sources="torch::Tensor gelu(torch::Tensor x);",
                cuda_sources=src, functions=["gelu"], verbose=False)
x = torch.randn(%d, device="cuda")
ok = torch.allclose(m.gelu(x), torch.nn.functional.gelu(x), atol=1e-5, rtol=1e-5)
ts = []
for _ in range(100):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); m.gelu(x); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
print("correct", ok, "median_ms", sorted(ts)[50])
""" % N


def load_inline_once():
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, TORCH_EXTENSIONS_DIR=d)
        p = subprocess.run([sys.executable, "-c", LOAD_INLINE], env=env, capture_output=True,
                           text=True, timeout=300)
        if p.returncode:
            print(p.stderr[-2000:], file=sys.stderr)
        return p.returncode


def main():
    rows = []
    t0 = time.time()
    errors = pygpubench_once()
    rows.append(("pygpubench do_bench_isolated (Triton GELU, 100 repeats)", time.time() - t0,
                 "errors %s" % errors))
    t0 = time.time()
    errors = pygpubench_once()
    rows.append(("pygpubench do_bench_isolated, second (warm caches)", time.time() - t0,
                 "errors %s" % errors))
    if "--skip-load-inline" not in sys.argv:
        t0 = time.time()
        rc = load_inline_once()
        rows.append(("KernelBench-style load_inline (fresh process)", time.time() - t0, "rc %d" % rc))
    for name, s, note in rows:
        print("anchor %-58s %8.2f s  %s" % (name, s, note))


if __name__ == "__main__":
    main()
