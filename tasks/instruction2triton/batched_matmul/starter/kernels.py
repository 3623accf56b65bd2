"""Batched float32 matrix multiply, in Triton: the specification (prompt.md has it all).

    A     float32 [batch, m, k]   input, row-major
    B     float32 [batch, k, n]   input, row-major
    C     float32 [batch, m, n]   output, row-major
    batch, m, n, k                int32

    C[b, i, j] = sum_p A[b, i, p] * B[b, p, j]     for every b

in float32 arithmetic or better: `tl.dot` of float32 rounds its inputs to TF32 unless
told `input_precision="ieee"`, and TF32 misses the tolerance

Only imports of triton, triton.language and math, constants and @triton.jit
functions may appear at the top level."""
import triton
import triton.language as tl


@triton.jit
def batched_matmul(a_ptr, b_ptr, c_ptr, batch, m, n, k):
    # the kernel's body: yours to write (add tl.constexpr parameters as you need)
    pass
