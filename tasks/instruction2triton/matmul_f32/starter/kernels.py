"""Float32 matrix multiply, in Triton: the specification (prompt.md has it all).

    A     float32 [m, k]   input, row-major
    B     float32 [k, n]   input, row-major
    C     float32 [m, n]   output, row-major
    m, n, k                int32

    C[i, j] = sum_p A[i, p] * B[p, j]

in float32 arithmetic or better: `tl.dot` of float32 rounds its inputs to TF32 unless
told `input_precision="ieee"`, and TF32 misses the tolerance

Only imports of triton, triton.language and math, constants and @triton.jit
functions may appear at the top level."""
import triton
import triton.language as tl


@triton.jit
def matmul(a_ptr, b_ptr, c_ptr, m, n, k):
    # the kernel's body: yours to write (add tl.constexpr parameters as you need)
    pass
