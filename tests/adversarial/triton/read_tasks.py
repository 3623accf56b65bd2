"""Adversarial (read_tasks_tt, a compile-time refusal checked in CI): the kernel body has
Triton's code generator list the task folders while it compiles, the first step to reading
an instruction2triton task's hidden baseline into the compile log (review 2026-12-01).
The harness (tests/triton_compile_test.c) puts the task folder's path for @TASK_DIR@, as
an attacker who knows where the tasks are installed would."""
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    getattr(triton.compiler.compiler.os, "listdir")("@TASK_DIR@")
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)
