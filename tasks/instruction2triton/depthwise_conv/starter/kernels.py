"""Depthwise 3x3 convolution, in Triton: the specification (prompt.md has it all).

    x     float32 [N, C, H, W]   input, NCHW, row-major
    wt    float32 [C, 3, 3]      input
    y     float32 [N, C, H, W]   output
    N, C, H, W                   int32

    y[n, c, h, w] = sum_{i, j in 0..2} wt[c, i, j] * x[n, c, h + i - 1, w + j - 1]

with x taken as 0 outside the image (padding 1, stride 1; each channel its own filter)

Only imports of triton, triton.language and math, constants and @triton.jit
functions may appear at the top level."""
import triton
import triton.language as tl


@triton.jit
def depthwise3x3(x_ptr, w_ptr, y_ptr, N, C, H, W):
    # the kernel's body: yours to write (add tl.constexpr parameters as you need)
    pass
