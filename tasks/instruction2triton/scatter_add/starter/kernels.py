"""Scatter-add of rows (index_add), in Triton: the specification (prompt.md has it all).

    table  float32 [vocab, dim]   input, row-major
    idx    int32   [n]            input, values in [0, vocab)
    src    float32 [n, dim]       input, row-major
    out    float32 [vocab, dim]   output
    n, dim, vocab                 int32

    out = table;  then for every i:  out[idx[i], :] += src[i, :]

(PyTorch's `table.index_add(0, idx, src)`; many i share an index, in any order)

Only imports of triton, triton.language and math, constants and @triton.jit
functions may appear at the top level."""
import triton
import triton.language as tl


@triton.jit
def scatter_add(table_ptr, idx_ptr, src_ptr, out_ptr, n, dim, vocab):
    # the kernel's body: yours to write (add tl.constexpr parameters as you need)
    pass
