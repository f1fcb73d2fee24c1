/* host_buffer.c: the host-memory buffers that backends computing in host
 * memory (reference, cpu) share. */
#include "gt/backend.h"

#include <stdlib.h>
#include <string.h>

/* Host buffers: 64-byte aligned so SIMD kernels may use aligned loads on
 * activations. A wrapped buffer (weights) points at the caller's bytes. */
int gt_host_buffer_alloc(gt_backend *b, size_t size, gt_buffer **out, gt_err *err)
{
    gt_buffer *buf = calloc(1, sizeof *buf);
    void *mem = NULL;
    if (!buf || posix_memalign(&mem, 64, size ? size : 64) != 0) {
        free(buf);
        return gt_err_set(err, "out of memory allocating a %zu-byte host buffer", size);
    }
    memset(mem, 0, size);
    buf->backend = b;
    buf->size = size;
    buf->host = mem;
    buf->impl = mem; /* owned: freed with the buffer */
    *out = buf;
    return 0;
}

int gt_host_buffer_from_host(gt_backend *b, const void *host, size_t size, gt_buffer **out,
                             gt_err *err)
{
    gt_buffer *buf = calloc(1, sizeof *buf);
    if (!buf)
        return gt_err_set(err, "out of memory");
    buf->backend = b;
    buf->size = size;
    buf->host = (void *)host; /* read-only by contract: weights are never written */
    buf->impl = NULL;         /* not owned */
    *out = buf;
    return 0;
}

void gt_host_buffer_free(gt_buffer *buf)
{
    if (!buf)
        return;
    free(buf->impl);
    free(buf);
}

int gt_host_upload(gt_buffer *buf, size_t offset, const void *src, size_t n, gt_err *err)
{
    if (offset > buf->size || n > buf->size - offset)
        return gt_err_set(err, "upload of %zu bytes at %zu overruns a %zu-byte buffer", n, offset,
                          buf->size);
    memcpy((char *)buf->host + offset, src, n);
    return 0;
}

int gt_host_download(gt_buffer *buf, size_t offset, void *dst, size_t n, gt_err *err)
{
    if (offset > buf->size || n > buf->size - offset)
        return gt_err_set(err, "download of %zu bytes at %zu overruns a %zu-byte buffer", n,
                          offset, buf->size);
    memcpy(dst, (const char *)buf->host + offset, n);
    return 0;
}
