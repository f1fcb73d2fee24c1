/* test_refuse.c: a model the runtime does not understand is refused by
 * name, never run.
 *
 * A synthetic llama file is copied key by key and tensor by tensor, with one
 * thing added: a tensor the llama graph does not use
 * (blk.0.attn_sink_extra.weight, or Llama 3's rope_freqs.weight), a key
 * that changes the math (llama.attn_logit_softcapping = 30), or a key whose
 * value is not implemented (llama.rope.scaling.type = "yarn"). Each load
 * must fail GT_MODEL_UNSUPPORTED naming it; the plain copy, and copies with
 * keys model_keys.c lists as harmless at the value they carry, must load.
 * Then the same through the program: `gauntlet inspect` names it and exits
 * 1, `gauntlet plan` shows the cell as "skip: unsupported model: ...", and
 * `gauntlet qualify` records that skip and the gate fails on it unless the
 * matrix allows the category. Every shipped model file that is here loads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/gguf.h"
#include "gt/model.h"
#include "gt/synth.h"
#include "testutil.h"

#define BIN "'" GT_BINARY_DIR "/gauntlet'"

static char g_tiny[4096]; /* the synthetic llama file every case starts from */

typedef enum { K_NONE, K_F32, K_STR, K_U32 } ktype;
typedef struct extra {
    const char *tensor;       /* an added f32 tensor (NULL: none) */
    int n_tensors;            /* how many: tensor, with "%d" filled 0..n-1 when n > 1 */
    const char *key;          /* an added key (NULL: none) */
    ktype kt;
    float f;
    const char *s;
    uint32_t u;
    const char *key2;         /* a second string key */
    const char *s2;
} extra;

/* Copies g_tiny to dst with what e adds. */
static void write_with(const char *dst, const extra *e)
{
    gt_gguf *g;
    gt_err err = {{0}};
    ck_assert_msg(gt_gguf_open(g_tiny, &g, &err) == 0, "%s", err.msg);
    gt_gguf_writer *w = gt_gguf_writer_new();
    ck_assert_ptr_nonnull(w);
    for (int64_t i = 0; i < gt_gguf_n_kv(g); i++)
        ck_assert_int_eq(gt_gguf_writer_copy_kv(w, g, i), 0);
    for (int64_t i = 0; i < gt_gguf_n_tensors(g); i++) {
        const gt_gguf_tensor *t = gt_gguf_tensor_at(g, i);
        ck_assert_int_eq(gt_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data,
                                                   t->nbytes), 0);
    }
    static float ones[64];
    for (int i = 0; i < 64; i++)
        ones[i] = 1.0f;
    char names[40][96];
    const int64_t ne[1] = {32};
    for (int k = 0; e && e->tensor && k < e->n_tensors; k++) {
        snprintf(names[k], sizeof names[k], e->tensor, k);
        ck_assert_int_eq(gt_gguf_writer_add_tensor(w, names[k], GT_TYPE_F32, 1, ne, ones,
                                                   sizeof(float) * 32), 0);
    }
    if (e && e->key) {
        if (e->kt == K_F32)
            ck_assert_int_eq(gt_gguf_writer_set_f32(w, e->key, e->f), 0);
        else if (e->kt == K_STR)
            ck_assert_int_eq(gt_gguf_writer_set_str(w, e->key, e->s), 0);
        else
            ck_assert_int_eq(gt_gguf_writer_set_u32(w, e->key, e->u), 0);
    }
    if (e && e->key2)
        ck_assert_int_eq(gt_gguf_writer_set_str(w, e->key2, e->s2), 0);
    ck_assert_msg(gt_gguf_writer_write(w, dst, &err) == 0, "%s", err.msg);
    gt_gguf_writer_free(w);
    gt_gguf_close(g);
}

/* Loads the copy with e; returns gt_model_load's code, the message in msg. */
static int load_with(const extra *e, char *msg, size_t cap)
{
    const char *path = gt_test_tmp("variant.gguf");
    write_with(path, e);
    gt_model *m = NULL;
    gt_err err = {{0}};
    int rc = gt_model_load(path, &m, &err);
    gt_model_free(m);
    snprintf(msg, cap, "%s", rc ? err.msg : "");
    return rc;
}

static void expect_refused(const extra *e, const char *needle)
{
    char msg[1100];
    int rc = load_with(e, msg, sizeof msg);
    ck_assert_msg(rc == GT_MODEL_UNSUPPORTED, "rc %d (want unsupported): %s", rc, msg);
    ck_assert_msg(strstr(msg, ": unsupported: ") && strstr(msg, needle), "%s\nlacks: %s", msg,
                  needle);
}

static void expect_loads(const extra *e)
{
    char msg[1100];
    int rc = load_with(e, msg, sizeof msg);
    ck_assert_msg(rc == 0, "rc %d: %s", rc, msg);
}

START_TEST(plain_copy_loads)
{
    gt_model *m = NULL;
    gt_err err = {{0}};
    ck_assert_msg(gt_model_load(g_tiny, &m, &err) == 0, "%s", err.msg);
    gt_model_free(m);
    expect_loads(NULL); /* the copying itself adds nothing */
}
END_TEST

START_TEST(unused_tensor_refused)
{
    expect_refused(&(extra){.tensor = "blk.0.attn_sink_extra.weight", .n_tensors = 1},
                   "unsupported: tensor blk.0.attn_sink_extra.weight is not used by the llama "
                   "graph");
    /* Phi-3's RoPE factors in a llama file: the llama graph applies only
     * rope_freqs.weight (tests/test_rope_factors.c), so not run. */
    expect_refused(&(extra){.tensor = "rope_factors_long.weight", .n_tensors = 1},
                   "tensor rope_factors_long.weight is not used by the llama graph");
    /* Many: the first six named, the rest counted. */
    expect_refused(&(extra){.tensor = "blk.%d.attn_sink_extra.weight", .n_tensors = 9},
                   "tensors blk.0.attn_sink_extra.weight, blk.1.attn_sink_extra.weight, "
                   "blk.2.attn_sink_extra.weight, blk.3.attn_sink_extra.weight, "
                   "blk.4.attn_sink_extra.weight, blk.5.attn_sink_extra.weight and 3 more are "
                   "not used by the llama graph");
}
END_TEST

START_TEST(math_key_refused)
{
    expect_refused(&(extra){.key = "llama.attn_logit_softcapping", .kt = K_F32, .f = 30.0f},
                   "unsupported: metadata key llama.attn_logit_softcapping = 30 is not "
                   "implemented");
    expect_refused(&(extra){.key = "llama.final_logit_softcapping", .kt = K_F32, .f = 30.0f},
                   "metadata key llama.final_logit_softcapping = 30 is not implemented");
    expect_refused(&(extra){.key = "llama.expert_count", .kt = K_U32, .u = 8},
                   "metadata key llama.expert_count = 8 is not implemented");
    /* A head size other than n_embd / n_head (llama.cpp allows it). */
    expect_refused(&(extra){.key = "llama.attention.key_length", .kt = K_U32, .u = 32},
                   "metadata key llama.attention.key_length = 32 is not implemented");
    /* A namespace nobody here knows, and a file that is not a model. */
    expect_refused(&(extra){.key = "clip.vision.image_size", .kt = K_U32, .u = 224},
                   "metadata key clip.vision.image_size = 224 is not implemented");
    expect_refused(&(extra){.key = "general.type", .kt = K_STR, .s = "adapter"},
                   "metadata key general.type = \"adapter\" is not implemented");
}
END_TEST

START_TEST(key_value_refused)
{
    expect_refused(&(extra){.key = "llama.rope.scaling.type", .kt = K_STR, .s = "yarn"},
                   "unsupported: metadata key llama.rope.scaling.type = \"yarn\" is not "
                   "implemented");
    expect_refused(&(extra){.key = "llama.rope.scaling.type", .kt = K_STR, .s = "longrope"},
                   "unsupported: metadata key llama.rope.scaling.type = \"longrope\" is not "
                   "implemented");
    /* the scaling reader refuses yarn before the unread keys are listed */
    expect_refused(&(extra){.key = "llama.rope.scaling.original_context_length", .kt = K_U32,
                            .u = 8192, .key2 = "llama.rope.scaling.type", .s2 = "yarn"},
                   "metadata key llama.rope.scaling.type = \"yarn\" is not implemented");
    /* A tensor and a key: both in one message. */
    expect_refused(&(extra){.tensor = "blk.0.attn_sink_extra.weight", .n_tensors = 1,
                            .key = "llama.attn_logit_softcapping", .kt = K_F32, .f = 50.0f},
                   "tensor blk.0.attn_sink_extra.weight is not used by the llama graph; "
                   "metadata key llama.attn_logit_softcapping = 50 is not implemented");
}
END_TEST

/* The values model_keys.c calls harmless do load: the list is not a
 * refusal of every key it names. */
START_TEST(harmless_values_load)
{
    expect_loads(&(extra){.key = "llama.rope.scaling.type", .kt = K_STR, .s = "none"});
    expect_loads(&(extra){.key = "llama.rope.scaling.factor", .kt = K_F32, .f = 1.0f});
    /* implemented: no type is linear scaling (tests/test_rope_factors.c) */
    expect_loads(&(extra){.key = "llama.rope.scaling.factor", .kt = K_F32, .f = 8.0f});
    expect_loads(&(extra){.key = "llama.rope.scaling.original_context_length", .kt = K_U32,
                          .u = 8192, .key2 = "llama.rope.scaling.type", .s2 = "linear"});
    expect_loads(&(extra){.key = "llama.expert_count", .kt = K_U32, .u = 0});
    expect_loads(&(extra){.key = "llama.rope.scaling.original_context_length", .kt = K_U32,
                          .u = 8192});
    expect_loads(&(extra){.key = "llama.vocab_size", .kt = K_U32, .u = 512});
    expect_loads(&(extra){.key = "general.license", .kt = K_STR, .s = "apache-2.0"});
    expect_loads(&(extra){.key = "general.type", .kt = K_STR, .s = "model"});
    expect_loads(&(extra){.key = "tokenizer.chat_template", .kt = K_STR, .s = "{{ x }}"});
    expect_loads(&(extra){.key = "quantize.imatrix.file", .kt = K_STR, .s = "imatrix.dat"});
    /* A vocab_size the tokenizer disagrees with is a broken file, not a
     * refusal. */
    char msg[1100];
    int rc = load_with(&(extra){.key = "llama.vocab_size", .kt = K_U32, .u = 513}, msg,
                       sizeof msg);
    ck_assert_msg(rc == -1 && strstr(msg, "llama.vocab_size = 513 differs"), "%d %s", rc, msg);
}
END_TEST

START_TEST(unknown_architecture_refused)
{
    char msg[1100];
    int rc = load_with(&(extra){.key = "general.architecture", .kt = K_STR, .s = "starcoder2"}, msg,
                       sizeof msg);
    ck_assert_msg(rc == GT_MODEL_UNSUPPORTED && strstr(msg, "architecture 'starcoder2' is not "
                                                            "implemented"), "%d %s", rc, msg);
}
END_TEST

/* Every model file shipped with or fetched for the tests, and every synth
 * preset: none carries what the runtime would refuse. */
START_TEST(shipped_models_load)
{
    const char *files[] = {"stories260K.gguf", "llamacpp-quants/stories260K-f16.gguf",
                           "llamacpp-quants/stories260K-q8_0.gguf",
                           "llamacpp-quants/stories260K-q4_0.gguf",
                           "llamacpp-quants/stories260K-q4_1.gguf"};
    int n = 0;
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        const char *p = gt_test_model(files[i]);
        gt_model *m = NULL;
        gt_err err = {{0}};
        if (!p)
            continue;
        ck_assert_msg(gt_model_load(p, &m, &err) == 0, "%s", err.msg);
        gt_model_free(m);
        n++;
    }
    const char *real[] = {gt_test_smollm2(), gt_test_gemma3()};
    for (int i = 0; i < 2; i++) {
        gt_model *m = NULL;
        gt_err err = {{0}};
        if (!real[i])
            continue;
        ck_assert_msg(gt_model_load(real[i], &m, &err) == 0, "%s", err.msg);
        gt_model_free(m);
        n++;
    }
    for (int i = 0; gt_synth_preset_at(i); i++) {
        const char *path = gt_test_tmp("preset.gguf");
        gt_err err = {{0}};
        /* q8_0 keeps the 135M-parameter preset small; rows it does not
         * divide stay f32. */
        const gt_synth_shape *sh = gt_synth_preset_at(i);
        gt_type t = sh->n_embd % 32 || sh->n_ff % 32 ? GT_TYPE_F32 : GT_TYPE_Q8_0;
        ck_assert_msg(gt_synth_write(path, sh->name, 1, t, &err) == 0, "%s", err.msg);
        gt_model *m = NULL;
        ck_assert_msg(gt_model_load(path, &m, &err) == 0, "%s: %s", gt_synth_preset_at(i)->name,
                      err.msg);
        gt_model_free(m);
        remove(path);
        n++;
    }
    printf("shipped_models_load: %d files loaded\n", n);
    ck_assert_int_ge(n, 3);
}
END_TEST

static const extra SINK = {.tensor = "blk.0.attn_sink_extra.weight", .n_tensors = 1};

START_TEST(inspect_names_it)
{
    const char *bad = gt_test_tmp("sink.gguf");
    write_with(bad, &SINK);
    static char out[1 << 18];
    int rc = gt_test_run_in(gt_test_tmp(""), out, sizeof out, BIN " inspect '%s'", bad);
    ck_assert_msg(rc == 1, "inspect exited %d (want 1): %.3000s", rc, out);
    ck_assert_msg(strstr(out, "\nmodel: unsupported: tensor blk.0.attn_sink_extra.weight is not "
                              "used by the llama graph\n"), "%.3000s",
                  strstr(out, "\nmodel") ? strstr(out, "\nmodel") : out);
    /* Still listed: the tensor in the table and the metadata. */
    ck_assert_msg(strstr(out, "\ntensors:\n") && strstr(strstr(out, "\ntensors:\n"),
                                                        "blk.0.attn_sink_extra.weight"), "%.3000s", out);
    ck_assert_ptr_nonnull(strstr(out, "llama.block_count"));
    /* JSON says it too, with the same exit code. */
    rc = gt_test_run_in(gt_test_tmp(""), out, sizeof out, BIN " inspect --json '%s'", bad);
    ck_assert_msg(rc == 1 && strstr(out, "\"status\":\t\"unsupported\"") &&
                      strstr(out, "\"reason\":\t\"unsupported: tensor blk.0.attn_sink_extra.weight"
                                  " is not used by the llama graph\""),
                  "rc %d: %.3000s", rc, strstr(out, "\"model\"") ? strstr(out, "\"model\"") : out);
    rc = gt_test_run_in(gt_test_tmp(""), out, sizeof out, BIN " inspect --json '%s'", g_tiny);
    ck_assert_msg(rc == 0 && strstr(out, "\"status\":\t\"ok\"") &&
                      strstr(out, "\"architecture\":\t\"llama\""), "rc %d: %.3000s", rc,
                  strstr(out, "\"model\"") ? strstr(out, "\"model\"") : out);
    /* The plain file: 0 and no such line (the control). */
    rc = gt_test_run_in(gt_test_tmp(""), out, sizeof out, BIN " inspect '%s'", g_tiny);
    ck_assert_msg(rc == 0 && !strstr(out, "unsupported"), "rc %d: %.3000s", rc, out);
}
END_TEST

/* A matrix of the plain tiny model and the one with the extra tensor. */
static const char *write_matrix(const char *bad, const char *gate)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"name\": \"refuse\", \"models\": [{\"id\": \"good\", \"path\": \"%s\"},\n"
             "  {\"id\": \"bad\", \"path\": \"%s\"}],\n"
             " \"quants\": [\"f32\"], \"backends\": [\"reference\"],\n"
             " \"defaults\": {\"timeout_s\": 120, \"threads\": 1},\n"
             " \"tiers\": {\"smoke\": {\"suites\": [\"smoke\"]}}%s}\n", g_tiny, bad, gate);
    const char *mx = gt_test_tmp(gate[0] ? "allow.json" : "refuse.json");
    gt_test_write_file(mx, text, strlen(text));
    return mx;
}

START_TEST(plan_and_qualify_name_it)
{
    const char *bad = gt_test_tmp("sink.gguf");
    write_with(bad, &SINK);
    const char *mx = write_matrix(bad, "");
    static char out[1 << 16];
    const char *want = "unsupported model: model bad: tensor blk.0.attn_sink_extra.weight is not "
                       "used by the llama graph";
    int rc = gt_test_run_in(gt_test_tmp(""), out, sizeof out, BIN " plan '%s'", mx);
    ck_assert_msg(rc == 0, "plan exited %d: %.3000s", rc, out);
    const char *row = strstr(out, "bad/f32/reference");
    ck_assert_msg(row && strstr(row, "skip: ") && strstr(row, want), "%.3000s", out);
    const char *good = strstr(out, "good/f32/reference"), *eol = good ? strchr(good, '\n') : NULL;
    ck_assert_msg(eol && strstr(good, " run smoke") < eol, "%.3000s", out);

    /* qualify: the cell skips with that reason and the gate fails on it. */
    rc = gt_test_run_in(gt_test_tmp(""), out, sizeof out,
                        BIN " qualify '%s' --db r.sqlite --no-progress", mx);
    ck_assert_msg(rc == 1 && strstr(out, "gate: FAIL"), "qualify exited %d: %.3000s", rc, out);
    sqlite3 *h = gt_test_db_open(gt_test_tmp("r.sqlite"));
    ck_assert_str_eq(gt_test_q_text(h, "SELECT status FROM cells WHERE model = 'bad'"),
                     "skip\n");
    ck_assert_str_eq(gt_test_q_text(h, "SELECT status FROM cells WHERE model = 'good'"),
                     "pass\n");
    const char *why = gt_test_q_text(h, "SELECT reason FROM cells WHERE model = 'bad'");
    ck_assert_msg(strncmp(why, want, strlen(want)) == 0, "%s", why);
    sqlite3_close(h);

    /* The report shows the reason. */
    rc = gt_test_run_in(gt_test_tmp(""), out, sizeof out,
                        BIN " report --db r.sqlite --markdown r.md --html r.html");
    ck_assert_msg(rc == 0, "report exited %d: %.3000s", rc, out);
    char *md = gt_test_slurp(gt_test_tmp("r.md"));
    ck_assert_msg(md && strstr(md, "blk.0.attn_sink_extra.weight"), "%.3000s", md ? md : "(none)");
    free(md);
    /* The environment names the architecture of the model that ran. */
    char *html = gt_test_slurp(gt_test_tmp("r.html"));
    const char *env = html ? strstr(html, "<h3>Models</h3>") : NULL;
    ck_assert_msg(env && strstr(env, "<td>good</td><td>llama</td>"), "%.2000s",
                  env ? env : "(no Models table)");
    free(html);

    /* A matrix that allows the category passes: the gate's policy, not
     * the runtime, is what made it fail. */
    const char *allow = write_matrix(bad, ",\n \"gate\": {\"allowed_skips\": "
                                          "[\"unsupported model\"]}");
    rc = gt_test_run_in(gt_test_tmp(""), out, sizeof out,
                        BIN " qualify '%s' --db a.sqlite --no-progress", allow);
    ck_assert_msg(rc == 0 && strstr(out, "gate: PASS"), "qualify exited %d: %.3000s", rc, out);
}
END_TEST

int main(void)
{
    gt_test_require_gauntlet();
    snprintf(g_tiny, sizeof g_tiny, "%s", gt_test_tmp("tiny.gguf"));
    gt_err err = {{0}};
    if (gt_synth_write(g_tiny, "tiny", 1, GT_TYPE_F32, &err) != 0) {
        fprintf(stderr, "synth: %s\n", err.msg);
        return 1;
    }
    Suite *s = suite_create("refuse");
    TCase *tc = tcase_create("load");
    tcase_add_test(tc, plain_copy_loads);
    tcase_add_test(tc, unused_tensor_refused);
    tcase_add_test(tc, math_key_refused);
    tcase_add_test(tc, key_value_refused);
    tcase_add_test(tc, harmless_values_load);
    tcase_add_test(tc, unknown_architecture_refused);
    tcase_add_test(tc, shipped_models_load);
    suite_add_tcase(s, tc);
    TCase *cli = tcase_create("cli");
    tcase_set_timeout(cli, 300);
    tcase_add_test(cli, inspect_names_it);
    tcase_add_test(cli, plan_and_qualify_name_it);
    suite_add_tcase(s, cli);
    return gt_test_run(s);
}
