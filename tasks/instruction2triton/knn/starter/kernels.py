"""K-nearest-neighbour distances, in Triton: the specification (prompt.md has it all).

    queries  float32 [nq, dim]     input, row-major, coordinates in [0, 1)
    points   float32 [npts, dim]   input, row-major, coordinates in [0, 1)
    dist     float32 [nq, k]       output, row-major
    nq, npts, dim, k               int32, 1 <= dim <= 16, 1 <= k <= 32, k <= npts

    dist[i, 0..k) = the k smallest of  sum_d (queries[i, d] - points[j, d])^2  over j,
                    in ascending order

(squared Euclidean distances; only the distances, not the indices)

Only imports of triton, triton.language and math, constants and @triton.jit
functions may appear at the top level."""
import triton
import triton.language as tl


@triton.jit
def knn(q_ptr, p_ptr, dist_ptr, nq, npts, dim, k):
    # the kernel's body: yours to write (add tl.constexpr parameters as you need)
    pass
