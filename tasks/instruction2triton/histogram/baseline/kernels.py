"""The hidden baseline of instruction2triton/histogram (never shown to the agent): a
kernel that zeroes the counts, then one program per BLOCK keys adding 1 to each key's
bin with an atomic add (integers: the result does not depend on the order)."""
import triton
import triton.language as tl


@triton.jit
def zero_counts(counts_ptr, bins, BLOCK: tl.constexpr):
    b = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(counts_ptr + b, tl.zeros([BLOCK], tl.int32), mask=b < bins)


@triton.jit
def histogram_keys(x_ptr, counts_ptr, n, bins, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    x = tl.load(x_ptr + i, mask=mask, other=0)
    b = (x * bins) >> 16
    tl.atomic_add(counts_ptr + b, tl.full([BLOCK], 1, tl.int32), mask=mask)
