/* opencl_cache.h: the on-disk cache of built OpenCL program binaries (see
 * opencl_cache.c for the file format and why it is trusted so little). */
#ifndef GT_OPENCL_CACHE_H
#define GT_OPENCL_CACHE_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a 64; h = 0 starts a new hash, else continues one. */
uint64_t gt_ocl_fnv1a(uint64_t h, const void *data, size_t n);

/* The cache folder, or "" when caching is off. */
void gt_ocl_cache_dir(char *out, size_t cap);
/* The file that holds key's entry in dir. */
void gt_ocl_cache_path(const char *dir, const char *key, char *out, size_t cap);

/* 0 and a malloc'ed binary on a hit; -1 and why ("no entry", "corrupt
 * (checksum mismatch)", "stale (...)") otherwise. Never trusts the file. */
int gt_ocl_cache_load(const char *dir, const char *key, unsigned char **bin, size_t *len,
                      char *why, size_t why_len);
/* Writes atomically (temporary file + rename); -1 and why on failure. */
int gt_ocl_cache_store(const char *dir, const char *key, const unsigned char *bin, size_t len,
                       char *why, size_t why_len);

#endif
