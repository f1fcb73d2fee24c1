/* test_constraint.c: constrained decoding (gt/constraint.h).
 *
 * - compile: the subset compiles; every keyword outside it is refused by
 *   name with the JSON pointer of its schema; malformed schemas are refused.
 * - bytes: documents fed one byte token at a time: a valid one is accepted
 *   to the end and is then done (the end token allowed, nothing else); an
 *   invalid byte is refused by accept and masked by mask.
 * - mask_matches_accept: for every token of the vocabulary, after prefixes
 *   that put the automaton inside strings, escapes, characters, numbers
 *   and literals, mask allows it exactly when accept takes it.
 * - generate: greedy decoding of a synthetic model (random weights) under
 *   each schema of a set: the constraint alone makes the output a complete
 *   document, which a validator written here (test_json_valid.h) accepts.
 * - oracle: the same outputs validated by the jsonschema package
 *   (suites/data/jsonschema_validate.py), which we did not write. */
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/backend.h"
#include "gt/constraint.h"
#include "gt/model.h"
#include "gt/sampler.h"
#include "gt/session.h"
#include "gt/synth.h"
#include "test_json_valid.h"
#include "testutil.h"

static const char *g_model; /* a synthetic "tiny" model, random weights */

static gt_model *load(void)
{
    gt_err err = {{0}};
    gt_model *m = NULL;
    ck_assert_msg(gt_model_load(g_model, &m, &err) == 0, "%s", err.msg);
    return m;
}

/* ---- compile ---- */

static const char *const REFUSED[][2] = {
    {"{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\",\"pattern\":\"a+\"}}}",
     "unsupported JSON Schema keyword \"pattern\" at /properties/x"},
    {"{\"minLength\":1}", "\"minLength\" at / (the root)"},
    {"{\"oneOf\":[{\"type\":\"string\"}]}", "\"oneOf\""},
    {"{\"allOf\":[{\"type\":\"string\"}]}", "\"allOf\""},
    {"{\"not\":{}}", "\"not\""},
    {"{\"type\":\"string\",\"format\":\"email\"}", "\"format\""},
    {"{\"type\":\"number\",\"exclusiveMinimum\":0}", "\"exclusiveMinimum\""},
    {"{\"type\":\"number\",\"multipleOf\":2}", "\"multipleOf\""},
    {"{\"type\":\"array\",\"uniqueItems\":true}", "\"uniqueItems\""},
    {"{\"type\":\"array\",\"prefixItems\":[{}]}", "\"prefixItems\""},
    {"{\"type\":\"array\",\"contains\":{}}", "\"contains\""},
    {"{\"type\":\"object\",\"patternProperties\":{}}", "\"patternProperties\""},
    {"{\"type\":\"object\",\"minProperties\":1}", "\"minProperties\""},
    {"{\"if\":{},\"then\":{}}", "\"if\""},
    {"{\"type\":\"array\",\"items\":{\"type\":\"object\",\"additionalProperties\":true}}",
     "\"additionalProperties\" at /items: only false"},
    {"{\"type\":\"array\",\"items\":[{\"type\":\"string\"}]}", "\"items\" as an array"},
    {"{\"$defs\":{\"a\":{\"type\":\"string\",\"maxLength\":2,\"pattern\":\"x\"}},\"type\":\"null\"}",
     "\"pattern\" at /$defs/a"},
    {"{\"$ref\":\"http://example.com/s.json\"}", "unsupported $ref"},
    {"{\"$ref\":\"#/$defs/missing\"}", "points at nothing"},
    {"{\"$ref\":\"#/$defs/a\",\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}}}", "cycle of $ref"},
    {"{\"$ref\":\"#/$defs/a\",\"type\":\"object\",\"$defs\":{\"a\":{}}}", "beside \"$ref\""},
    {"{\"anyOf\":[{}],\"type\":\"object\"}", "beside \"anyOf\""},
    {"{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", "minItems > maxItems"},
    {"{\"type\":\"integer\",\"minimum\":0.2,\"maximum\":0.8}", "admits no value"},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"minimum\":5,"
     "\"maximum\":4}},\"required\":[\"a\"]}",
     "admits no value"},
    {"{\"$defs\":{\"t\":{\"type\":\"object\",\"properties\":{\"k\":{\"$ref\":\"#/$defs/t\"}},"
     "\"required\":[\"k\"]}},\"$ref\":\"#/$defs/t\"}",
     "admits no value"},
    {"{\"enum\":[1,2],\"type\":\"string\"}", "no enum/const value"},
    {"{\"type\":\"strin\"}", "unknown type \"strin\" at /"},
    {"{\"type\":\"string\",\"maxLength\":-1}", "maxLength at / (the root) must be"},
    {"{\"type\": \"object\",", "not valid JSON"},
    {"false", "the schema false"},
    {"[]", "must be an object or a boolean"},
};

START_TEST(compile_refuses_by_name)
{
    gt_model *m = load();
    for (size_t i = 0; i < sizeof REFUSED / sizeof REFUSED[0]; i++) {
        gt_err err = {{0}};
        gt_constraint *c = (gt_constraint *)1;
        ck_assert_msg(gt_constraint_from_schema(m, REFUSED[i][0], &c, &err) != 0,
                      "accepted: %s", REFUSED[i][0]);
        ck_assert_msg(c == NULL, "out set on failure for %s", REFUSED[i][0]);
        ck_assert_msg(strstr(err.msg, REFUSED[i][1]) != NULL, "%s\n  gave: %s\n  want: %s",
                      REFUSED[i][0], err.msg, REFUSED[i][1]);
    }
    gt_model_free(m);
}
END_TEST

/* ---- the schemas generated under ---- */

static const char *const SCHEMAS[] = {
    /* flat */
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},"
    "\"ok\":{\"type\":\"boolean\"},\"n\":{\"type\":\"null\"},\"x\":{\"type\":[\"string\",\"null\"],"
    "\"maxLength\":3}},\"required\":[\"name\",\"ok\"]}",
    /* nested */
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"object\",\"properties\":{\"b\":"
    "{\"type\":\"object\",\"properties\":{\"c\":{\"type\":\"integer\",\"minimum\":-5,"
    "\"maximum\":5}},\"required\":[\"c\"]}},\"required\":[\"b\"]}},\"required\":[\"a\"]}",
    /* array with bounds on its length and its items */
    "{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":99},"
    "\"minItems\":2,\"maxItems\":4}",
    /* enum */
    "{\"type\":\"object\",\"properties\":{\"color\":{\"enum\":[\"red\",\"green\",\"blue\"]},"
    "\"size\":{\"enum\":[1,12,\"XL\",null]}},\"required\":[\"color\",\"size\"]}",
    /* const */
    "{\"type\":\"object\",\"properties\":{\"v\":{\"const\":\"1.0\"},\"k\":{\"const\":{\"x\":[1,2]}}},"
    "\"required\":[\"v\",\"k\"]}",
    /* anyOf */
    "{\"type\":\"array\",\"minItems\":3,\"maxItems\":3,\"items\":{\"anyOf\":[{\"type\":\"string\","
    "\"maxLength\":3},{\"type\":\"integer\",\"minimum\":10,\"maximum\":20},{\"type\":\"object\","
    "\"properties\":{\"z\":{\"type\":\"boolean\"}},\"required\":[\"z\"]}]}}",
    /* $ref */
    "{\"$defs\":{\"pt\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\","
    "\"minimum\":-1.5,\"maximum\":2.25},\"y\":{\"$ref\":\"#/$defs/small\"}},\"required\":[\"x\","
    "\"y\"]},\"small\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":3}},\"type\":\"object\","
    "\"properties\":{\"p\":{\"$ref\":\"#/$defs/pt\"},\"q\":{\"type\":\"array\",\"items\":"
    "{\"$ref\":\"#/definitions/pt2\"},\"maxItems\":2}},\"required\":[\"p\",\"q\"],"
    "\"definitions\":{\"pt2\":{\"$ref\":\"#/$defs/pt\"}}}",
    /* integer bounds, all negative */
    "{\"type\":\"integer\",\"minimum\":-1234,\"maximum\":-1000}",
    /* number bounds */
    "{\"type\":\"object\",\"properties\":{\"f\":{\"type\":\"number\",\"minimum\":0.25,"
    "\"maximum\":0.5}},\"required\":[\"f\"]}",
    /* maxLength */
    "{\"type\":\"string\",\"maxLength\":5}",
};
#define N_SCHEMAS (int)(sizeof SCHEMAS / sizeof SCHEMAS[0])

/* Greedy decoding under c on backend; out gets the text. Fails the test
 * unless the document completes (an end token) within budget. */
static void generate(gt_model *m, const char *backend, gt_constraint *c, char *out, size_t cap)
{
    gt_err err = {{0}};
    gt_backend *b = NULL;
    gt_session *s = NULL;
    ck_assert_msg(gt_backend_open(backend, NULL, &b, &err) == 0, "%s", err.msg);
    gt_session_params p = {.n_ctx = 256};
    ck_assert_msg(gt_session_new(m, b, &p, &s, &err) == 0, "%s", err.msg);
    const int nv = gt_model_hparams(m)->n_vocab;
    float *logits = malloc(sizeof(float) * (size_t)nv);
    int32_t ids[32];
    const char *prompt = "The answer:";
    int n = gt_tokenize(gt_model_tokenizer(m), prompt, strlen(prompt), true, ids, 32, &err);
    ck_assert_int_gt(n, 0);
    ck_assert_int_le(n, 32);
    ck_assert_msg(gt_session_eval(s, ids, n, false, logits, &err) == 0, "%s", err.msg);
    size_t len = 0;
    bool ended = false;
    for (int step = 0; step < 240; step++) {
        ck_assert_int_gt(gt_constraint_mask(c, logits), 0);
        int32_t t = gt_argmax(logits, nv);
        if (gt_constraint_is_end(c, t)) {
            ck_assert(gt_constraint_done(c));
            ended = true;
            break;
        }
        ck_assert_msg(gt_constraint_accept(c, t, &err) == 0, "%s", err.msg);
        char piece[64];
        int pl = gt_token_to_bytes(gt_model_tokenizer(m), t, piece, sizeof piece);
        ck_assert(pl > 0 && pl < (int)sizeof piece && len + (size_t)pl < cap);
        memcpy(out + len, piece, (size_t)pl);
        len += (size_t)pl;
        ck_assert_msg(gt_session_eval(s, &t, 1, false, logits, &err) == 0, "%s", err.msg);
    }
    out[len] = '\0';
    ck_assert_msg(ended, "no end within the budget: %s", out);
    free(logits);
    gt_session_free(s);
    gt_backend_close(b);
}

START_TEST(generate_validates)
{
    gt_model *m = load();
    const char *schema = SCHEMAS[_i];
    gt_err err = {{0}};
    gt_constraint *c = NULL;
    ck_assert_msg(gt_constraint_from_schema(m, schema, &c, &err) == 0, "%s", err.msg);
    char out[4096];
    generate(m, "reference", c, out, sizeof out);
    printf("schema %d: %s\n", _i, out);
    cJSON *doc = cJSON_Parse(out), *sch = cJSON_Parse(schema);
    ck_assert_msg(doc != NULL, "not JSON: %s", out);
    char why[256] = "";
    ck_assert_msg(gt_test_json_valid(doc, sch, sch, why, sizeof why), "%s: %s", why, out);
    /* The same schema from the start again gives the same bytes. */
    gt_constraint_reset(c);
    char again[4096];
    generate(m, "reference", c, again, sizeof again);
    ck_assert_str_eq(out, again);
    cJSON_Delete(doc);
    cJSON_Delete(sch);
    gt_constraint_free(c);
    gt_model_free(m);
}
END_TEST

START_TEST(oracle_validates)
{
    gt_model *m = load();
    char args[8192] = "";
    size_t o = 0;
    for (int i = 0; i < N_SCHEMAS; i++) {
        gt_err err = {{0}};
        gt_constraint *c = NULL;
        ck_assert_msg(gt_constraint_from_schema(m, SCHEMAS[i], &c, &err) == 0, "%s", err.msg);
        char out[4096], name[32];
        generate(m, "reference", c, out, sizeof out);
        gt_constraint_free(c);
        snprintf(name, sizeof name, "schema%d.json", i);
        const char *sp = gt_test_tmp(name);
        gt_test_write_file(sp, SCHEMAS[i], strlen(SCHEMAS[i]));
        o += (size_t)snprintf(args + o, sizeof args - o, " '%s'", sp);
        snprintf(name, sizeof name, "doc%d.json", i);
        const char *dp = gt_test_tmp(name);
        gt_test_write_file(dp, out, strlen(out));
        o += (size_t)snprintf(args + o, sizeof args - o, " '%s'", dp);
    }
    ck_assert_int_eq(gt_test_sh("PYTHONPATH='%s' python3 '%s/suites/data/jsonschema_validate.py'%s",
                                gt_test_pyoracle(), GT_SOURCE_DIR, args),
                     0);
    gt_model_free(m);
}
END_TEST

/* ---- byte level ---- */

/* A token standing for the single byte b (the vocabulary's byte tokens). */
static int32_t byte_token(gt_model *m, uint8_t b)
{
    const gt_tokenizer *t = gt_model_tokenizer(m);
    for (int32_t id = 0; id < gt_tokenizer_n_vocab(t); id++) {
        char piece[8];
        if (gt_token_to_bytes(t, id, piece, sizeof piece) == 1 && (uint8_t)piece[0] == b)
            return id;
    }
    ck_abort_msg("no token for byte 0x%02x", b);
    return -1;
}

/* Feeds doc byte by byte; returns the index of the first byte refused (by
 * mask and by accept, which must agree), or -1 when all are taken. */
static int feed(gt_model *m, gt_constraint *c, const char *doc, size_t len)
{
    const int nv = gt_model_hparams(m)->n_vocab;
    float *logits = malloc(sizeof(float) * (size_t)nv);
    int bad = -1;
    for (size_t i = 0; i < len; i++) {
        for (int k = 0; k < nv; k++)
            logits[k] = 0;
        const int allowed = gt_constraint_mask(c, logits);
        ck_assert_int_gt(allowed, 0);
        /* special tokens never appear inside the document */
        ck_assert(isinf(logits[gt_tokenizer_eos(gt_model_tokenizer(m))]) ||
                  gt_constraint_done(c));
        ck_assert(isinf(logits[gt_tokenizer_bos(gt_model_tokenizer(m))]));
        const int32_t t = byte_token(m, (uint8_t)doc[i]);
        gt_err err = {{0}};
        const int rc = gt_constraint_accept(c, t, &err);
        ck_assert_msg((rc == 0) == !isinf(logits[t]), "mask and accept disagree at byte %zu of %s",
                      i, doc);
        if (rc != 0) {
            bad = (int)i;
            break;
        }
    }
    free(logits);
    return bad;
}

typedef struct bytes_case {
    const char *schema; /* NULL: any JSON object */
    const char *doc;
    int bad;            /* first byte refused; -1: valid and complete */
} bytes_case;

#define PERSON                                                                            \
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":5},"   \
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},\"tags\":{\"type\":"      \
    "\"array\",\"items\":{\"enum\":[\"a\",\"bc\"]},\"maxItems\":2}},\"required\":[\"name\"," \
    "\"age\"]}"
#define TREE                                                                              \
    "{\"$defs\":{\"t\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"  \
    "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/t\"}}},\"required\":"       \
    "[\"v\"]}},\"$ref\":\"#/$defs/t\"}"

static const bytes_case BYTES[] = {
    {NULL, "{\"a\": [1, -2.5, \"x\\u00e9\\n\xc3\xa9\", true, null, {\"b\": {}}, []],\"c\":\"\"}", -1},
    {NULL, "{}", -1},
    {NULL, " {\"a\":0.125}", -1},
    {NULL, "{\"a\" : 1}", 4},       /* no space before ':' */
    {NULL, "{\"a\":1,}", 7},        /* no trailing comma */
    {NULL, "{\"a\":01}", 6},        /* no leading zero */
    {NULL, "{\"a\":  1}", 6},       /* one space at most */
    {NULL, "{\"a\":1e5}", 6},       /* no exponent */
    {NULL, "{\"a\":\"\xc0\xaf\"}", 6}, /* overlong UTF-8 */
    {NULL, "{\"a\":\"\\ud800\"}", 9}, /* a lone surrogate half */
    {NULL, "[1]", 0},               /* an object, not an array */
    {NULL, "{\"a\":1} ", 7},        /* nothing after the document */
    {PERSON, "{\"name\":\"Ann\",\"age\":150}", -1},
    {PERSON, "{\"age\": 7, \"name\": \"\\\"\xc3\xa9\\u0041x\", \"tags\": [\"bc\", \"a\"]}", -1},
    {PERSON, "{\"name\":\"Ann\",\"age\":151}", 22},  /* past maximum */
    {PERSON, "{\"name\":\"Ann\",\"age\":-1}", 21},   /* under minimum (-0 is 0) */
    {PERSON, "{\"name\":\"Ann\",\"age\":1.5}", 21},  /* an integer */
    {PERSON, "{\"name\":\"Annabel\"}", 14},          /* maxLength 5 */
    {PERSON, "{\"name\":\"Ann\"}", 13},              /* age is required */
    {PERSON, "{\"name\":\"Ann\",\"nme\":1}", 15},    /* "name" is used up */
    {PERSON, "{\"name\":\"Ann\",\"agx\":1}", 17},    /* not a property */
    {PERSON, "{\"name\":\"A\",\"name\":\"B\"}", 13},  /* no key twice */
    {PERSON, "{\"age\":1,\"name\":\"\",\"tags\":[\"a\",\"a\",\"a\"]}", 34}, /* maxItems */
    {PERSON, "{\"age\":1,\"name\":\"\",\"tags\":[\"b\"]}", 29},             /* enum */
    {TREE, "{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[{\"v\":4,\"kids\":[]}]}]}", -1},
    {TREE, "{\"kids\":[]}", 10},
    {"{\"type\":\"integer\",\"minimum\":-3,\"maximum\":12}", "12", -1},
    {"{\"type\":\"integer\",\"minimum\":-3,\"maximum\":12}", "13", 1},
    {"{\"type\":\"integer\",\"minimum\":-3,\"maximum\":12}", "-4", 1},
    {"{\"type\":\"number\",\"minimum\":0.1,\"maximum\":0.3}", "0.1", -1},
    {"{\"type\":\"number\",\"minimum\":0.1,\"maximum\":0.3}", "0.3", -1},
    {"{\"type\":\"number\",\"minimum\":0.1,\"maximum\":0.3}", "0.30001", 6},
    {"{\"type\":\"number\",\"minimum\":0.1,\"maximum\":0.3}", "0.09", 2},
    {"{\"required\":[\"a\",\"b\"]}", "{\"b\":{\"c\":[]}, \"a\":[1]}", -1},
    {"{\"required\":[\"a\",\"b\"]}", "{\"a\":1}", 6},
    {"{\"enum\":[1,12,\"x\",[true]]}", "1", -1},
    {"{\"enum\":[1,12,\"x\",[true]]}", "12", -1},
    {"{\"enum\":[1,12,\"x\",[true]]}", "[true]", -1},
    {"{\"enum\":[1,12,\"x\",[true]]}", "13", 1},
    {"{\"anyOf\":[{\"type\":\"string\",\"maxLength\":1},{\"type\":\"array\",\"maxItems\":1}]}",
     "[\"ab\",1]", 5},
    {"{\"anyOf\":[{\"type\":\"string\",\"maxLength\":1},{\"type\":\"array\",\"maxItems\":1}]}",
     "\"ab\"", 2},
};

START_TEST(bytes)
{
    gt_model *m = load();
    const bytes_case *bc = &BYTES[_i];
    gt_err err = {{0}};
    gt_constraint *c = NULL;
    const int rc = bc->schema ? gt_constraint_from_schema(m, bc->schema, &c, &err)
                              : gt_constraint_json_object(m, &c, &err);
    ck_assert_msg(rc == 0, "%s", err.msg);
    ck_assert(!gt_constraint_done(c));
    const int bad = feed(m, c, bc->doc, strlen(bc->doc));
    ck_assert_msg(bad == bc->bad, "%s: first refused byte %d, want %d", bc->doc, bad, bc->bad);
    if (bc->bad < 0) {
        ck_assert_msg(gt_constraint_done(c), "%s: not done", bc->doc);
        /* complete: the end token is allowed, and nothing but end tokens */
        const int nv = gt_model_hparams(m)->n_vocab;
        float *logits = calloc((size_t)nv, sizeof(float));
        const int allowed = gt_constraint_mask(c, logits);
        const int32_t eos = gt_tokenizer_eos(gt_model_tokenizer(m));
        ck_assert(!isinf(logits[eos]));
        ck_assert(gt_constraint_is_end(c, eos));
        bool digits_may_follow = bc->doc[strlen(bc->doc) - 1] >= '0' &&
                                 bc->doc[strlen(bc->doc) - 1] <= '9';
        if (!digits_may_follow)
            ck_assert_int_eq(allowed, 1);
        ck_assert_int_eq(gt_constraint_accept(c, eos, &err), 0);
        free(logits);
    } else {
        /* the end token is not allowed inside a document */
        gt_constraint_reset(c);
        ck_assert_int_ne(gt_constraint_accept(c, gt_tokenizer_eos(gt_model_tokenizer(m)), &err),
                         0);
    }
    gt_constraint_free(c);
    gt_model_free(m);
}
END_TEST

/* Every token, not only byte tokens: after each prefix, mask allows a token
 * exactly when accept takes it (the string fast path and the trie walk
 * agree with stepping the token's bytes one by one). */
static const char *const PREFIXES[][2] = {
    {PERSON, ""},
    {PERSON, "{\"name\": \"Al"},   /* inside a string, 2 of 5 characters */
    {PERSON, "{\"name\": \"Alic"}, /* 4 of 5 */
    {PERSON, "{\"name\": \"A\\"}, /* inside an escape */
    {PERSON, "{\"name\": \"\xc3"}, /* inside a character */
    {PERSON, "{\"name\": \"A\", \"age\": 1"},
    {PERSON, "{\"age\": 1, \"name\": \"\", \"tags\": [\"bc\""},
    {NULL, "{\"a\": [\"x"},
    {NULL, "{\"a\": [tr"},
    {"{\"anyOf\":[{\"type\":\"string\",\"maxLength\":2},{\"type\":\"string\",\"maxLength\":4}]}",
     "\"a"},
};

START_TEST(mask_matches_accept)
{
    gt_model *m = load();
    const char *schema = PREFIXES[_i][0], *prefix = PREFIXES[_i][1];
    gt_err err = {{0}};
    gt_constraint *c = NULL;
    ck_assert_int_eq(schema ? gt_constraint_from_schema(m, schema, &c, &err)
                            : gt_constraint_json_object(m, &c, &err),
                     0);
    const int nv = gt_model_hparams(m)->n_vocab;
    ck_assert_int_eq(feed(m, c, prefix, strlen(prefix)), -1);
    float *logits = calloc((size_t)nv, sizeof(float));
    const int allowed = gt_constraint_mask(c, logits);
    int taken = 0;
    for (int32_t t = 0; t < nv; t++) {
        gt_constraint_reset(c);
        ck_assert_int_eq(feed(m, c, prefix, strlen(prefix)), -1);
        const bool ok = gt_constraint_accept(c, t, &err) == 0;
        ck_assert_msg(ok == !isinf(logits[t]), "token %d: accept %d, mask %d after %s", t, ok,
                      !isinf(logits[t]), prefix);
        taken += ok;
    }
    ck_assert_int_eq(taken, allowed);
    ck_assert_int_gt(allowed, 0);
    free(logits);
    gt_constraint_free(c);
    gt_model_free(m);
}
END_TEST

int main(void)
{
    static char path[4096];
    gt_err err = {{0}};
    snprintf(path, sizeof path, "%s", gt_test_tmp("tiny.gguf"));
    if (gt_synth_write(path, "tiny", 5, GT_TYPE_F32, &err) != 0) {
        fprintf(stderr, "cannot write the synthetic model: %s\n", err.msg);
        return 1;
    }
    g_model = path;
    bool have_jsonschema = gt_test_sh("PYTHONPATH='%s' python3 -c 'import jsonschema' 2>/dev/null",
                                      gt_test_pyoracle()) == 0;
    Suite *s = suite_create("constraint");
    TCase *tc = tcase_create("constraint");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, compile_refuses_by_name);
    tcase_add_loop_test(tc, bytes, 0, (int)(sizeof BYTES / sizeof BYTES[0]));
    tcase_add_loop_test(tc, mask_matches_accept, 0,
                        (int)(sizeof PREFIXES / sizeof PREFIXES[0]));
    tcase_add_loop_test(tc, generate_validates, 0, N_SCHEMAS);
    gt_test_add_if(tc, oracle_validates, have_jsonschema,
                   "python's jsonschema does not import from the oracle environment "
                   "(ci/test.sh installs it)");
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
