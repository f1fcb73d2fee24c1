/* jsonv.h: strict reading of JSON documents a person wrote (matrices).
 *
 * cJSON parses; this layer makes sure nothing is ignored silently: every
 * object is checked against the keys its reader knows (unknown and duplicate
 * keys are errors), every value against the type expected, and every error
 * names the file and the JSON path of the offending value, e.g.
 *     matrices/ci.json: models[1].sha256: expected 64 hex digits, got "abc"
 * Syntax errors carry line and column. Paths are built by the caller with
 * gt_jv_key/gt_jv_index into small buffers, so errors cost nothing until
 * they happen. */
#ifndef GT_JSONV_H
#define GT_JSONV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "gt/error.h"

#define GT_JV_PATH 256

typedef struct gt_jv {
    const char *file; /* named in every message */
    gt_err *err;
} gt_jv;

/* Parses text; a syntax error reads "FILE:LINE:COL: JSON syntax error near '...'". */
int gt_jv_parse(const char *file, const char *text, size_t len, cJSON **out, gt_err *err);

/* "FILE: PATH: message"; returns -1. */
int gt_jv_fail(const gt_jv *v, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Child paths: "models" + "sha256" -> "models.sha256"; keys that are not
 * identifiers are bracketed: tolerances["smoke.load_ms"]. */
const char *gt_jv_key(char buf[GT_JV_PATH], const char *path, const char *key);
const char *gt_jv_index(char buf[GT_JV_PATH], const char *path, int i);

const char *gt_jv_type_name(const cJSON *n);

/* node must be an object with only the given keys (NULL-terminated list) and
 * no key twice. allowed == NULL accepts any key (still no duplicates). */
int gt_jv_object(const gt_jv *v, const cJSON *node, const char *path,
                 const char *const *allowed);

/* Typed members of an object. An absent key leaves *out untouched and is an
 * error only when required. */
int gt_jv_str(const gt_jv *v, const cJSON *obj, const char *path, const char *key,
              bool required, const char **out);
int gt_jv_num(const gt_jv *v, const cJSON *obj, const char *path, const char *key,
              bool required, double min, double max, double *out);
int gt_jv_int(const gt_jv *v, const cJSON *obj, const char *path, const char *key,
              bool required, int64_t min, int64_t max, int64_t *out);
int gt_jv_bool(const gt_jv *v, const cJSON *obj, const char *path, const char *key,
               bool required, bool *out);
/* An array member; nonempty makes [] an error ("empty axis"). */
int gt_jv_arr(const gt_jv *v, const cJSON *obj, const char *path, const char *key,
              bool required, bool nonempty, const cJSON **out);
/* An object member (any keys; check them with gt_jv_object). */
int gt_jv_obj(const gt_jv *v, const cJSON *obj, const char *path, const char *key,
              bool required, const cJSON **out);

/* An identifier as used in cell ids: [A-Za-z0-9._+-], 1..64 chars. */
bool gt_jv_is_ident(const char *s);
/* obj[key] as an identifier of 1-64 characters from [A-Za-z0-9._+-]. */
int gt_jv_ident(const gt_jv *v, const cJSON *obj, const char *path, const char *key,
                char out[65]);

#endif
