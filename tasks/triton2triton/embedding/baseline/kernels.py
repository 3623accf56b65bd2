"""Embedding gather in Triton: one program per token and chunk of BLOCK columns copies
its part of the table row idx[t]. Only @triton.jit kernels, imports of triton and
constants may appear at the top level (prompt.md)."""
import triton
import triton.language as tl


@triton.jit
def embedding_rows(table_ptr, idx_ptr, out_ptr, tokens, dim, vocab, BLOCK: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < dim
    row = tl.load(idx_ptr + t).to(tl.int64)
    v = tl.load(table_ptr + row * dim + offs, mask=mask)
    tl.store(out_ptr + t * dim + offs, v, mask=mask)
