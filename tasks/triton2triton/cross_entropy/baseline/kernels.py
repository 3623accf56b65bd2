"""Cross-entropy in Triton: one program per row, an online max and sum of exponentials
over chunks of BLOCK classes, then the label's logit. Only @triton.jit kernels, imports
of triton and constants may appear at the top level (prompt.md)."""
import triton
import triton.language as tl


@triton.jit
def cross_entropy_rows(logits_ptr, labels_ptr, loss_ptr, rows, classes, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = logits_ptr + row * classes
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, classes, BLOCK):
        mask = start + offs < classes
        x = tl.load(x_row + start + offs, mask=mask, other=float("-inf"))
        m_new = tl.maximum(m, x)
        empty = m_new == float("-inf")
        s = s * tl.where(empty, 0.0, tl.exp(m - m_new)) + tl.where(empty, 0.0, tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, 0)
    total = tl.sum(s * tl.exp(m - row_max), 0)
    label = tl.load(labels_ptr + row)
    picked = tl.load(x_row + label)
    tl.store(loss_ptr + row, tl.log(total) + row_max - picked)
