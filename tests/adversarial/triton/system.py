"""Adversarial (system_tt, a compile-time refusal checked in CI): the kernel body has
Triton's code generator start a program (os.system) while it compiles."""
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    getattr(triton.compiler.compiler.os, "system")("touch /tmp/ka_triton_adv_system")
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)
