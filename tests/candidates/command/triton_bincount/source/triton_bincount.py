"""Bincount for penalties, written for kernelarena's command_h200 test (issue 19): one
launch instead of three. The baseline zeroes the rows with two indexed assignments (two
more kernels and their launch costs) and then counts in a (request, block) grid; here one
program per request zeroes its own rows, waits at a block barrier, and counts all of its
tokens. Same outputs: the rows of idx_mapping (one program each) are zeroed, then the
prompt tokens set their bits and the output tokens are counted."""
import torch
import triton
import triton.language as tl


@triton.jit
def _bincount_kernel(
    idx_mapping_ptr,
    all_token_ids_ptr,
    all_token_ids_stride,
    prompt_len_ptr,
    prefill_len_ptr,
    prompt_bin_mask_ptr,
    prompt_bin_mask_stride,
    mask_width,
    output_bin_counts_ptr,
    output_bin_counts_stride,
    counts_width,
    BLOCK_SIZE: tl.constexpr,
    ZERO_BLOCK: tl.constexpr,
):
    batch_idx = tl.program_id(0)
    req = tl.load(idx_mapping_ptr + batch_idx).to(tl.int64)
    mask_row = prompt_bin_mask_ptr + req * prompt_bin_mask_stride
    counts_row = output_bin_counts_ptr + req * output_bin_counts_stride

    zoffs = tl.arange(0, ZERO_BLOCK)
    zeros = tl.zeros((ZERO_BLOCK,), dtype=tl.int32)
    for z in range(0, counts_width, ZERO_BLOCK):
        tl.store(counts_row + z + zoffs, zeros, mask=z + zoffs < counts_width)
    for z in range(0, mask_width, ZERO_BLOCK):
        tl.store(mask_row + z + zoffs, zeros, mask=z + zoffs < mask_width)
    tl.debug_barrier()  # the zeros are in place before any thread of the block counts

    prompt_len = tl.load(prompt_len_ptr + req)
    prefill_len = tl.load(prefill_len_ptr + req)
    tokens_row = all_token_ids_ptr + req * all_token_ids_stride
    for start in range(0, prefill_len, BLOCK_SIZE):
        block = start + tl.arange(0, BLOCK_SIZE)
        valid = block < prefill_len
        tokens = tl.load(tokens_row + block, mask=valid, other=0)
        in_prompt = valid & (block < prompt_len)
        bit = tl.full((BLOCK_SIZE,), 1, tl.int32) << (tokens % 32)
        tl.atomic_or(mask_row + tokens // 32, bit, mask=in_prompt)
        tl.atomic_add(counts_row + tokens, 1, mask=valid & (block >= prompt_len))


def bincount(
    idx_mapping, all_token_ids, prompt_len, prefill_len,
    prompt_bin_mask, output_bin_counts, max_prefill_len,
):
    """Compute prompt bitmask and output bin counts for penalty computation."""
    num_reqs = idx_mapping.shape[0]
    _bincount_kernel[(num_reqs,)](
        idx_mapping, all_token_ids, all_token_ids.stride(0),
        prompt_len, prefill_len,
        prompt_bin_mask, prompt_bin_mask.stride(0), prompt_bin_mask.shape[1],
        output_bin_counts, output_bin_counts.stride(0), output_bin_counts.shape[1],
        BLOCK_SIZE=1024, ZERO_BLOCK=1024, num_warps=4,
    )
