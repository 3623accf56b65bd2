"""Adversarial (tests/adversarial/manifest.yaml, unwritten_tt): a kernel that writes
nothing, so y keeps its NaN poison."""
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pass
