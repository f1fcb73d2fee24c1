/* constraint_impl.h: what constraint_schema.c (JSON Schema -> nodes),
 * constraint_pda.c (the byte automaton) and constraint.c (the vocabulary
 * trie, masking, the public face) share. Private to libgtrt.
 *
 * A schema compiles to a graph of nodes; a node says which JSON values are
 * allowed at one place. The automaton is a pushdown automaton over bytes: a
 * state is a stack of frames (one per open value: the document root, an
 * object, an array, a key, a string, a number, a literal), kept as an
 * immutable linked list so that a step shares everything below the top
 * frame and costs one or two small allocations. anyOf runs its
 * alternatives as a set of states (at most GT_CN_MAX_STATES). */
#ifndef GT_CONSTRAINT_IMPL_H
#define GT_CONSTRAINT_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gt/constraint.h"

/* Nesting of frames a state may hold (root included): a recursive schema
 * is generated up to this depth, and compilation checks the schema has a
 * value that fits it. */
#define GT_CN_MAX_DEPTH 40
/* States run in parallel (anyOf). A state dropped beyond this only narrows
 * what may be generated: every state kept can still complete. */
#define GT_CN_MAX_STATES 32
/* Properties per object and values per enum: candidates are bit masks. */
#define GT_CN_MAX_SET 64

/* Numbers are written without exponent, with at most 12 integer digits and
 * 6 fraction digits, so every value is an exact int64 count of millionths
 * ("units") and bounds are checked exactly. */
#define GT_CN_INT_DIGITS 12
#define GT_CN_FRAC_DIGITS 6
#define GT_CN_UNIT 1000000LL
#define GT_CN_MAXU (1000000000000LL * GT_CN_UNIT - 1) /* 999999999999.999999 */

/* Kinds of JSON value a typed node allows (bits). */
enum {
    GT_CK_OBJ = 1,
    GT_CK_ARR = 2,
    GT_CK_STR = 4,
    GT_CK_INT = 8,  /* integer: no fraction */
    GT_CK_NUM = 16, /* number: fraction allowed (always with INT) */
    GT_CK_BOOL = 32,
    GT_CK_NULL = 64,
    GT_CK_ALL = 127,
};

typedef enum gt_cn_type {
    GT_CN_TYPED, /* kinds + per-kind keywords */
    GT_CN_LIT,   /* enum/const: one of a few exact texts */
    GT_CN_ANYOF, /* one of alts */
    GT_CN_REF,   /* $ref, resolved away after compilation */
} gt_cn_type;

#define GT_CN_INF 1000000 /* min_depth of a node with no value */

typedef struct gt_cn_node {
    gt_cn_type type;
    unsigned kinds;     /* TYPED */
    int ref;            /* REF: target node */
    int first, count;   /* ANYOF: c->alts[first..]; LIT: c->lit_*[first..] */
    /* object: closed (keys only from props) or free (any key, any value) */
    bool closed;
    int prop_first, n_props; /* c->props[prop_first..] */
    uint64_t required;       /* bit i: props[prop_first + i] */
    /* array */
    int items;               /* node of every item */
    int min_items, max_items; /* max -1: none */
    /* string */
    int max_len;             /* characters; -1: none */
    /* number: units, lo <= value <= hi (integer-only: multiples of a unit) */
    int64_t lo, hi;
    /* The fewest frames a value needs (GT_CN_INF: none can be written), as a
     * whole and per container kind. */
    int md, md_obj, md_arr;
} gt_cn_node;

typedef struct gt_cn_prop {
    char *key; /* the key as a JSON string literal, quotes included */
    int len;
    int node;
} gt_cn_prop;

/* The compiled schema. */
typedef struct gt_cn_schema {
    gt_cn_node *nodes;
    int n_nodes, cap_nodes;
    gt_cn_prop *props;
    int n_props, cap_props;
    int *alts;
    int n_alts, cap_alts;
    char **lit_txt; /* literal texts (compact JSON) */
    int *lit_len;
    int n_lits, cap_lits;
    int root, any; /* the document's node; the any-value node */
    int lit_bool, lit_null; /* first literal of "true","false" / "null" */
} gt_cn_schema;

/* Compiles schema_json (NULL: any JSON object). */
int gt_cn_compile(const char *schema_json, gt_cn_schema *s, gt_err *err);
void gt_cn_schema_free(gt_cn_schema *s);

/* constraint_text.c: a JSON string literal of s (quotes included; NULL
 * when out of memory); the compact JSON text of a cJSON value (malloc'ed);
 * the value of u millionths as a validator reads its decimal text; the
 * smallest count of millionths whose value is >= v (lower), or the largest
 * whose value is <= v, clamped just past the numbers' range. */
char *gt_cn_json_str(const char *s);
char *gt_cn_value_text(const void *json_value);
double gt_cn_units_value(int64_t u);
int64_t gt_cn_bound_units(double v, bool lower);

/* Frames. */
enum { GT_FR_ROOT, GT_FR_VAL, GT_FR_OBJ, GT_FR_KEY, GT_FR_ARR, GT_FR_STR, GT_FR_NUM, GT_FR_LIT };

typedef struct gt_cn_frame {
    const struct gt_cn_frame *up;
    uint64_t a, b;  /* OBJ: a seen keys; KEY/LIT: a candidates; NUM: a int part, b fraction;
                       STR: b max length (-1 none), a 1 after a \u escape's 'd' */
    int32_t node;   /* VAL/OBJ/ARR/NUM: the node; LIT: first literal */
    int32_t n;      /* OBJ: key chosen; ARR: items so far; STR: characters; KEY/LIT: bytes */
    uint8_t kind, phase, d, ws; /* d: frames up to here; ws: one space may come */
    uint8_t x, y, z, w; /* STR: escape state, UTF-8 bytes owed, next byte's range;
                           NUM: negative, integer digits, fraction digits */
} gt_cn_frame;

/* A bump allocator of frames; the mask walk rewinds it per trie depth. */
typedef struct gt_cn_arena {
    gt_cn_frame *f;
    size_t n, cap;
    size_t overflow; /* allocations refused (each narrowed a step) */
} gt_cn_arena;

/* A set of states (tops of stacks). */
typedef struct gt_cn_set {
    const gt_cn_frame *s[GT_CN_MAX_STATES];
    int n;
} gt_cn_set;

/* The states at the start of a document. */
void gt_cn_start(const gt_cn_schema *s, gt_cn_arena *a, gt_cn_set *out);
/* The states after byte b from each state of in (out may be empty). */
void gt_cn_step(const gt_cn_schema *s, gt_cn_arena *a, const gt_cn_set *in, uint8_t b,
                gt_cn_set *out);
/* Whether some state of in is a complete document. */
bool gt_cn_done(const gt_cn_schema *s, const gt_cn_set *in);

/* The vocabulary's side (constraint_vocab.c): a byte trie of some tokens,
 * in preorder. */
typedef struct gt_cn_trie {
    uint32_t n_nodes;
    uint8_t *byte;
    uint16_t *depth;
    uint32_t *next, *tok_first, *tok_n; /* next: the node past i's subtree */
    int32_t *sorted; /* the tokens by bytes; node i's are sorted[tok_first[i]..] */
} gt_cn_trie;

typedef struct gt_cn_vocab {
    int32_t n_vocab;
    char *bytes;
    uint32_t *off, *len; /* (n_vocab); len 0: never inside the document */
    uint8_t *is_end;     /* (n_vocab) */
    int max_len;
    gt_cn_trie all;      /* every token that may appear inside the document */
    gt_cn_trie other;    /* those of them that are not plain */
    int32_t *plain;      /* plain tokens by character count, ascending */
    uint32_t *plain_chars;
    int32_t n_plain;
} gt_cn_vocab;

/* m's, built on first use and kept until gt_model_free; NULL with err. */
const gt_cn_vocab *gt_cn_vocab_of(const gt_model *m, gt_err *err);
void gt_cn_vocab_free(gt_cn_vocab *v);

#endif
