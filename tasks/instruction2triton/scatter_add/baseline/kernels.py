"""The hidden baseline of instruction2triton/scatter_add (never shown to the agent): a
kernel that copies the table into out, then one program per source row and chunk of
BLOCK columns adding it into out's row idx[i] with float atomic adds."""
import triton
import triton.language as tl


@triton.jit
def copy_rows(table_ptr, out_ptr, vocab, dim, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = c < dim
    tl.store(out_ptr + r * dim + c, tl.load(table_ptr + r * dim + c, mask=mask), mask=mask)


@triton.jit
def scatter_rows(idx_ptr, src_ptr, out_ptr, n, dim, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = c < dim
    row = tl.load(idx_ptr + i).to(tl.int64)
    v = tl.load(src_ptr + i * dim + c, mask=mask)
    tl.atomic_add(out_ptr + row * dim + c, v, mask=mask)
