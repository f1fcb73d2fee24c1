/* opencl_tensor.c: addressing a tensor on the device: the kernels' index of
 * its element type, and the allocation (chunk) plus offset that hold its
 * bytes. Both the buffer code (opencl_backend.c) and compute (opencl_ops.c)
 * use them; they use nothing of either. */
#include "opencl_internal.h"

int gt_ocl_type_index(gt_type t)
{
    switch (t) {
    case GT_TYPE_F32: return OT_F32;
    case GT_TYPE_F16: return OT_F16;
    case GT_TYPE_BF16: return OT_BF16;
    case GT_TYPE_Q8_0: return OT_Q8_0;
    case GT_TYPE_Q4_0: return OT_Q4_0;
    case GT_TYPE_Q4_1: return OT_Q4_1;
    case GT_TYPE_Q5_0: return OT_Q5_0;
    case GT_TYPE_Q5_1: return OT_Q5_1;
    case GT_TYPE_IQ4_NL: return OT_IQ4_NL;
    case GT_TYPE_Q2_K: return OT_Q2_K;
    case GT_TYPE_Q3_K: return OT_Q3_K;
    case GT_TYPE_Q4_K: return OT_Q4_K;
    case GT_TYPE_Q5_K: return OT_Q5_K;
    case GT_TYPE_Q6_K: return OT_Q6_K;
    default: return -1;
    }
}

int gt_ocl_resolve(const gt_buffer *buf, size_t offset, size_t n, cl_mem *mem, size_t *off,
                   gt_err *err)
{
    const ocl_buf *ob = buf->impl;
    if (offset > buf->size || n > buf->size - offset)
        return gt_err_set(err, "%zu bytes at offset %zu run past the end of a %zu-byte buffer", n,
                          offset, buf->size);
    int i = ob->n_chunks == 1 ? 0 : (int)(offset / ob->stride);
    if (i >= ob->n_chunks)
        i = ob->n_chunks - 1;
    const size_t start = (size_t)i * ob->stride;
    if (offset + n > start + gt_ocl_chunk_len(ob, buf, i))
        return gt_err_set(err, "a tensor of %zu bytes at offset %zu does not fit one chunk of a "
                               "weight buffer split for CL_DEVICE_MAX_MEM_ALLOC_SIZE (chunks of "
                               "%zu bytes overlapping by %zu); this device cannot hold it",
                          n, offset, ob->chunk, ob->chunk - ob->stride);
    *mem = ob->mem[i];
    *off = offset - start;
    return 0;
}
