/* gguf.h: GGUF v2/v3 artifacts, read over mmap and written from memory.
 *
 * The reader validates everything before anything else sees it: magic,
 * version, counts, string lengths, value types, tensor types, shapes,
 * element-count overflow, tensor data bounds and alignment, duplicate keys and
 * tensor names. A failure names the problem and the byte offset. Split files
 * (split.count / split.no, "NAME-0000N-of-0000M.gguf") open as one artifact:
 * pass any shard's path; metadata comes from shard 1, tensors from all. */
#ifndef GT_GGUF_H
#define GT_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gt/error.h"
#include "gt/quant.h"

typedef enum gt_gguf_vtype {
    GT_GGUF_UINT8 = 0,
    GT_GGUF_INT8 = 1,
    GT_GGUF_UINT16 = 2,
    GT_GGUF_INT16 = 3,
    GT_GGUF_UINT32 = 4,
    GT_GGUF_INT32 = 5,
    GT_GGUF_FLOAT32 = 6,
    GT_GGUF_BOOL = 7,
    GT_GGUF_STRING = 8,
    GT_GGUF_ARRAY = 9,
    GT_GGUF_UINT64 = 10,
    GT_GGUF_INT64 = 11,
    GT_GGUF_FLOAT64 = 12,
} gt_gguf_vtype;

#define GT_GGUF_MAX_DIMS 4

typedef struct gt_gguf_tensor {
    const char *name;               /* NUL-terminated copy */
    gt_type type;
    int n_dims;
    int64_t ne[GT_GGUF_MAX_DIMS];   /* ne[0] is the row length; unused dims are 1 */
    int64_t n_elements;
    size_t nbytes;
    uint64_t offset;                /* relative to its shard's data section */
    int shard;                      /* 0-based shard index */
    const void *data;               /* points into the mmap */
} gt_gguf_tensor;

typedef struct gt_gguf gt_gguf;

int gt_gguf_open(const char *path, gt_gguf **out, gt_err *err);
/* Like gt_gguf_open, but a tensor whose type this runtime does not know
 * does not fail the open: it is listed with its type id as stored
 * (gt_type_info(type) == NULL), nbytes 0 and data NULL, and its data is
 * not checked. For tools that show a file (inspect); a model never loads
 * from such a handle. */
int gt_gguf_open_lenient(const char *path, gt_gguf **out, gt_err *err);
void gt_gguf_close(gt_gguf *g);

uint32_t gt_gguf_version(const gt_gguf *g);
uint32_t gt_gguf_alignment(const gt_gguf *g);
int gt_gguf_n_shards(const gt_gguf *g);
const char *gt_gguf_shard_path(const gt_gguf *g, int shard);
/* The mmapped data section of one shard (tensor data lives there). */
const void *gt_gguf_data(const gt_gguf *g, int shard, size_t *size);
uint64_t gt_gguf_file_size(const gt_gguf *g); /* all shards together */

/* Metadata key/values. Index-based access, plus typed lookups by key. */
int64_t gt_gguf_n_kv(const gt_gguf *g);
int64_t gt_gguf_find_key(const gt_gguf *g, const char *key); /* -1 if absent */
const char *gt_gguf_key(const gt_gguf *g, int64_t i);
gt_gguf_vtype gt_gguf_kv_type(const gt_gguf *g, int64_t i);
/* Scalar value of kv i converted to the requested kind; false when kv i is
 * not a scalar of a compatible kind (any integer for _int, any number for
 * _float, BOOL for _bool). */
bool gt_gguf_kv_int(const gt_gguf *g, int64_t i, int64_t *out);
bool gt_gguf_kv_float(const gt_gguf *g, int64_t i, double *out);
bool gt_gguf_kv_bool(const gt_gguf *g, int64_t i, bool *out);
const char *gt_gguf_kv_str(const gt_gguf *g, int64_t i, size_t *len); /* NULL if not a STRING */
/* The value of kv i exactly as stored in the file (the bytes after its type),
 * nested arrays included; points into the mmap. For byte-exact copies. */
const void *gt_gguf_kv_raw(const gt_gguf *g, int64_t i, size_t *len);
/* Arrays: element type, length, raw little-endian data (numeric arrays),
 * and element j of a string array. */
gt_gguf_vtype gt_gguf_arr_type(const gt_gguf *g, int64_t i);
uint64_t gt_gguf_arr_len(const gt_gguf *g, int64_t i);
const void *gt_gguf_arr_data(const gt_gguf *g, int64_t i);
const char *gt_gguf_arr_str(const gt_gguf *g, int64_t i, uint64_t j, size_t *len);

/* Convenience lookups by key; return `def` (or NULL) when absent or of the
 * wrong kind. */
int64_t gt_gguf_get_int(const gt_gguf *g, const char *key, int64_t def);
double gt_gguf_get_float(const gt_gguf *g, const char *key, double def);
bool gt_gguf_get_bool(const gt_gguf *g, const char *key, bool def);
const char *gt_gguf_get_str(const gt_gguf *g, const char *key);

const char *gt_gguf_vtype_name(gt_gguf_vtype t);
/* Bytes of one value of a scalar type; 0 for STRING, ARRAY and unknown ids. */
size_t gt_gguf_vtype_size(gt_gguf_vtype t);

/* Tensors, in file order across shards. */
int64_t gt_gguf_n_tensors(const gt_gguf *g);
const gt_gguf_tensor *gt_gguf_tensor_at(const gt_gguf *g, int64_t i);
const gt_gguf_tensor *gt_gguf_find_tensor(const gt_gguf *g, const char *name);

/* Writer: collect metadata and tensors, then write one file (v3, alignment 32
 * unless general.alignment is set). Tensor data pointers must stay valid until
 * gt_gguf_writer_write returns. Setting a key twice replaces its value. */
typedef struct gt_gguf_writer gt_gguf_writer;

gt_gguf_writer *gt_gguf_writer_new(void);
void gt_gguf_writer_free(gt_gguf_writer *w);
int gt_gguf_writer_set_u32(gt_gguf_writer *w, const char *key, uint32_t v);
int gt_gguf_writer_set_i32(gt_gguf_writer *w, const char *key, int32_t v);
int gt_gguf_writer_set_f32(gt_gguf_writer *w, const char *key, float v);
int gt_gguf_writer_set_bool(gt_gguf_writer *w, const char *key, bool v);
int gt_gguf_writer_set_str(gt_gguf_writer *w, const char *key, const char *v);
/* Any scalar type; value points to the matching C type (uint8_t for UINT8,
 * int16_t for INT16, ..., double for FLOAT64, bool for BOOL). */
int gt_gguf_writer_set_scalar(gt_gguf_writer *w, const char *key, gt_gguf_vtype type,
                              const void *value);
/* Numeric array: n elements of elem_type, raw little-endian. */
int gt_gguf_writer_set_arr(gt_gguf_writer *w, const char *key, gt_gguf_vtype elem_type,
                           const void *data, uint64_t n);
int gt_gguf_writer_set_arr_str(gt_gguf_writer *w, const char *key,
                               const char *const *strs, uint64_t n);
/* Copy kv i of src, whatever its type (used by quantize). */
int gt_gguf_writer_copy_kv(gt_gguf_writer *w, const gt_gguf *src, int64_t i);
int gt_gguf_writer_add_tensor(gt_gguf_writer *w, const char *name, gt_type type,
                              int n_dims, const int64_t *ne, const void *data, size_t nbytes);
/* Writes to path atomically (temporary file, then rename). */
int gt_gguf_writer_write(gt_gguf_writer *w, const char *path, gt_err *err);

#endif
