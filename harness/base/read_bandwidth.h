/* read_bandwidth.h: the machine's measured read bandwidth (see
 * read_bandwidth.c). */
#ifndef GT_READ_BANDWIDTH_H
#define GT_READ_BANDWIDTH_H

#include <stddef.h>

/* GB/s of a streaming sum over a buffer of `bytes` on nt threads (best of
 * three passes after a warm-up); 0 with why when the buffer cannot be had. */
double gt_read_bandwidth(size_t bytes, int nt, char *why, size_t why_len);

#endif
