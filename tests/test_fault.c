/* test_fault.c: each runtime GT_FAULT kind (gt/fault.h) changes the logits
 * the way it says, and only that way; bad entries are refused by name.
 *
 * main() writes synthetic tiny models (f32 and q8_0) and, in a child
 * process that never sees GT_FAULT, the clean logits of reference and cpu:
 * 8 tokens as one batch (every row), and 12 tokens evaluated one at a time
 * (decode). Each case runs in its own process (Check forks), sets GT_FAULT
 * before the runtime first reads it, and compares the faulted logits with
 * the clean ones: a scaled row is the clean row times (1 + X), a swap
 * exchanges exactly two columns, kv-decode-drop@N leaves the batch and the
 * decode before N identical to the bit and changes decode from N on,
 * graph-drop-last changes the reference's logits too, pos-wrap@N leaves
 * every position below N identical to the bit and changes every one from N
 * on, in the batch (which it splits into RoPE pieces) as in decode (one
 * position at a time), which agree with each other. The cases also check
 * gt_fault_active, so a case that ran with another case's parse fails. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gt/backend.h"
#include "gt/fault.h"
#include "gt/model.h"
#include "gt/session.h"
#include "gt/synth.h"

enum { N_PRE = 8, N_DEC = 12, NV = 512 /* the tiny preset's vocabulary */ };

static const char *BACKENDS[] = {"reference", "cpu"};
static char f32_path[4096], q8_path[4096];

typedef struct logits {
    float pre[N_PRE * NV]; /* the batch, every row */
    float dec[N_DEC * NV]; /* one token at a time */
} logits;

static int32_t token(int i) { return i == 0 ? 1 : (int32_t)((i * 37 + 11) % NV); }

/* Runs the batch and the decode on backend; 0, or -1 with err set. */
static int compute(const char *model_path, const char *backend, logits *out, gt_err *err)
{
    gt_model *m = NULL;
    gt_backend *b = NULL;
    gt_session *s = NULL;
    int rc = -1;
    int32_t ids[N_DEC];
    for (int i = 0; i < N_DEC; i++)
        ids[i] = token(i);
    const gt_session_params sp = {.n_ctx = 64};
    if (gt_model_load(model_path, &m, err) != 0 || gt_backend_open(backend, NULL, &b, err) != 0 ||
        gt_session_new(m, b, &sp, &s, err) != 0 ||
        gt_session_eval(s, ids, N_PRE, true, out->pre, err) != 0)
        goto done;
    /* A fresh cache for the decode: rows the batch wrote would hide a K/V
     * write that decode skips. */
    gt_session_free(s);
    s = NULL;
    if (gt_session_new(m, b, &sp, &s, err) != 0)
        goto done;
    for (int i = 0; i < N_DEC; i++)
        if (gt_session_eval(s, ids + i, 1, false, out->dec + (size_t)i * NV, err) != 0)
            goto done;
    rc = 0;
done:
    gt_session_free(s);
    gt_backend_close(b);
    gt_model_free(m);
    return rc;
}

static const char *clean_path(const char *model, int bi)
{
    static char p[2][2][4200];
    const int mi = model == q8_path;
    snprintf(p[mi][bi], sizeof p[mi][bi], "%s.%s.clean", model, BACKENDS[bi]);
    return p[mi][bi];
}

static logits *load_clean(const char *model, int bi)
{
    logits *l = malloc(sizeof *l);
    ck_assert_ptr_nonnull(l);
    FILE *f = fopen(clean_path(model, bi), "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fread(l, sizeof *l, 1, f), 1);
    fclose(f);
    return l;
}

static logits *faulted(const char *model, int bi)
{
    logits *l = malloc(sizeof *l);
    ck_assert_ptr_nonnull(l);
    gt_err err = {{0}};
    ck_assert_msg(compute(model, BACKENDS[bi], l, &err) == 0, "%s: %s", BACKENDS[bi], err.msg);
    return l;
}

static void set_fault(const char *fault, const char *backend)
{
    setenv("GT_FAULT", fault, 1);
    if (backend)
        setenv("GT_FAULT_BACKEND", backend, 1);
    else
        unsetenv("GT_FAULT_BACKEND");
}

static bool rows_equal(const float *a, const float *b) { return !memcmp(a, b, sizeof(float) * NV); }

static double max_abs_diff(const float *a, const float *b, int n)
{
    double d = 0;
    for (int i = 0; i < n; i++)
        d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

START_TEST(logit_scale)
{
    set_fault("logit-scale=0.5", NULL);
    for (int bi = 0; bi < 2; bi++) {
        ck_assert_str_eq(gt_fault_active(BACKENDS[bi]), "logit-scale=0.5");
        logits *c = load_clean(f32_path, bi), *f = faulted(f32_path, bi);
        for (int i = 0; i < N_PRE * NV; i++)
            ck_assert_float_eq(f->pre[i], (float)(c->pre[i] * 1.5));
        for (int i = 0; i < N_DEC * NV; i++)
            ck_assert_float_eq(f->dec[i], (float)(c->dec[i] * 1.5));
        free(c);
        free(f);
    }
}
END_TEST

/* Only matmuls on quantized weights: the f32 model's logits keep every
 * bit, the q8_0 model's move; the reference stays clean (backend cpu). */
START_TEST(logit_scale_quant)
{
    set_fault("logit-scale-quant=0.1", "cpu");
    ck_assert_str_eq(gt_fault_active("reference"), "");
    logits *c = load_clean(f32_path, 1), *f = faulted(f32_path, 1);
    ck_assert_msg(!memcmp(c, f, sizeof *c), "f32 weights are not quantized: logits must not move");
    free(c);
    free(f);
    c = load_clean(q8_path, 1);
    f = faulted(q8_path, 1);
    const double d = max_abs_diff(c->pre, f->pre, N_PRE * NV);
    ck_assert_msg(d > 1e-2, "q8_0 logits moved only %g", d);
    free(c);
    free(f);
    c = load_clean(q8_path, 0);
    f = faulted(q8_path, 0);
    ck_assert_msg(!memcmp(c, f, sizeof *c), "GT_FAULT_BACKEND=cpu: the reference must stay clean");
    free(c);
    free(f);
}
END_TEST

/* Noise of 0.01 x the row's range: every row moves, by a few percent of its
 * range at most, and the same way in two runs (deterministic). */
START_TEST(logit_noise)
{
    set_fault("logit-noise=0.01", "cpu");
    logits *c = load_clean(f32_path, 1), *f = faulted(f32_path, 1), *g = faulted(f32_path, 1);
    ck_assert_msg(!memcmp(f, g, sizeof *f), "the noise is seeded: two runs must agree");
    for (int r = 0; r < N_PRE; r++) {
        const float *cr = c->pre + r * NV;
        float lo = cr[0], hi = cr[0];
        for (int i = 0; i < NV; i++)
            lo = fminf(lo, cr[i]), hi = fmaxf(hi, cr[i]);
        const double d = max_abs_diff(cr, f->pre + r * NV, NV);
        ck_assert_msg(d > 0 && d < 0.07 * (hi - lo), "row %d moved %g (range %g)", r, d, hi - lo);
    }
    free(c);
    free(f);
    free(g);
}
END_TEST

START_TEST(token_swap)
{
    set_fault("token-swap=3:500", NULL);
    for (int bi = 0; bi < 2; bi++) {
        logits *c = load_clean(f32_path, bi), *f = faulted(f32_path, bi);
        for (int r = 0; r < N_PRE; r++)
            for (int i = 0; i < NV; i++) {
                const int j = i == 3 ? 500 : i == 500 ? 3 : i;
                ck_assert_float_eq(f->pre[r * NV + i], c->pre[r * NV + j]);
            }
        free(c);
        free(f);
    }
}
END_TEST

/* Token 7 is every row's argmax by more than the row's range; the other
 * columns keep their values. */
START_TEST(const_token)
{
    set_fault("const-token=7", "cpu");
    logits *c = load_clean(f32_path, 1), *f = faulted(f32_path, 1);
    for (int r = 0; r < N_PRE + N_DEC; r++) {
        const float *cr = r < N_PRE ? c->pre + r * NV : c->dec + (r - N_PRE) * NV;
        const float *fr = r < N_PRE ? f->pre + r * NV : f->dec + (r - N_PRE) * NV;
        float lo = cr[0], hi = cr[0], second = -INFINITY;
        for (int i = 0; i < NV; i++) {
            lo = fminf(lo, cr[i]), hi = fmaxf(hi, cr[i]);
            if (i != 7) {
                ck_assert_float_eq(fr[i], cr[i]);
                second = fmaxf(second, fr[i]);
            }
        }
        ck_assert_msg(fr[7] - second > hi - lo, "row %d: token 7 leads by %g only", r,
                      fr[7] - second);
    }
    free(c);
    free(f);
}
END_TEST

START_TEST(nan_at)
{
    set_fault("nan-at=2", "cpu");
    logits *c = load_clean(f32_path, 1), *f = faulted(f32_path, 1);
    for (int r = 0; r < N_PRE; r++) {
        if (r == 2) {
            for (int i = 0; i < NV; i++)
                ck_assert(isnan(f->pre[r * NV + i]) && isnan(f->dec[r * NV + i]));
        } else {
            ck_assert(rows_equal(f->pre + r * NV, c->pre + r * NV));
            ck_assert(rows_equal(f->dec + r * NV, c->dec + r * NV));
        }
    }
    free(c);
    free(f);
}
END_TEST

/* In the graph the runtime builds: the reference has it too. */
START_TEST(graph_drop_last)
{
    set_fault("graph-drop-last", NULL);
    for (int bi = 0; bi < 2; bi++) {
        ck_assert_str_eq(gt_fault_active(BACKENDS[bi]), "graph-drop-last");
        logits *c = load_clean(f32_path, bi), *f = faulted(f32_path, bi);
        const double d = max_abs_diff(c->pre, f->pre, N_PRE * NV);
        ck_assert_msg(d > 0.1, "%s: dropping the last layer moved the logits by %g only",
                      BACKENDS[bi], d);
        free(c);
        free(f);
    }
}
END_TEST

/* The batch writes K/V as always (bit-identical, also past N); decode is
 * identical before position N and differs from N on. */
START_TEST(kv_decode_drop)
{
    set_fault("kv-decode-drop@6", "cpu");
    logits *c = load_clean(f32_path, 1), *f = faulted(f32_path, 1);
    ck_assert_msg(!memcmp(c->pre, f->pre, sizeof c->pre), "a batch of 8 must be untouched");
    for (int p = 0; p < N_DEC; p++) {
        const bool same = rows_equal(c->dec + p * NV, f->dec + p * NV);
        ck_assert_msg(same == (p < 6), "decode position %d: %s", p,
                      same ? "unchanged at or past N" : "changed before N");
    }
    free(c);
    free(f);
}
END_TEST

/* A window of 3: rows that see at most 3 positions are unchanged. */
START_TEST(attn_window)
{
    set_fault("attn-window=3", NULL);
    for (int bi = 0; bi < 2; bi++) {
        logits *c = load_clean(f32_path, bi), *f = faulted(f32_path, bi);
        for (int p = 0; p < N_PRE; p++) {
            const bool same = rows_equal(c->pre + p * NV, f->pre + p * NV);
            ck_assert_msg(same == (p < 3), "%s position %d: %s", BACKENDS[bi], p,
                          same ? "unchanged past the window" : "changed inside the window");
        }
        free(c);
        free(f);
    }
}
END_TEST

/* Positions below N keep every bit and every one from N on moves, on both
 * backends. The batch of 8 crosses N (6) once, or N (3) twice, so it is
 * roped in pieces; decode ropes one position at a time. Both wrap the same
 * positions, so the faulted batch rows agree with the faulted decode rows
 * as closely as the clean ones do (the pieces rotate the right rows by the
 * right positions). */
static void expect_pos_wrap(const char *fault, int n, int bi)
{
    logits *c = load_clean(f32_path, bi), *f = faulted(f32_path, bi);
    for (int p = 0; p < N_DEC; p++) {
        const bool same_dec = rows_equal(c->dec + p * NV, f->dec + p * NV);
        ck_assert_msg(same_dec == (p < n), "%s on %s, decode position %d: %s", fault, BACKENDS[bi],
                      p, same_dec ? "unchanged at or past N" : "changed before N");
        if (p >= N_PRE)
            continue;
        const bool same_pre = rows_equal(c->pre + p * NV, f->pre + p * NV);
        ck_assert_msg(same_pre == (p < n), "%s on %s, batch position %d: %s", fault, BACKENDS[bi],
                      p, same_pre ? "unchanged at or past N" : "changed before N");
        ck_assert_msg(same_pre || max_abs_diff(c->pre + p * NV, f->pre + p * NV, NV) > 1e-3,
                      "%s on %s, batch position %d moved by rounding only", fault, BACKENDS[bi],
                      p);
    }
    const double clean = max_abs_diff(c->pre, c->dec, N_PRE * NV);
    const double wrapped = max_abs_diff(f->pre, f->dec, N_PRE * NV);
    ck_assert_msg(wrapped <= 4 * clean + 1e-5,
                  "%s on %s: the batch's pieces and decode disagree by %g (clean: %g)", fault,
                  BACKENDS[bi], wrapped, clean);
    free(c);
    free(f);
}

START_TEST(pos_wrap)
{
    set_fault("pos-wrap@6", NULL);
    for (int bi = 0; bi < 2; bi++) {
        ck_assert_str_eq(gt_fault_active(BACKENDS[bi]), "pos-wrap@6");
        expect_pos_wrap("pos-wrap@6", 6, bi);
    }
}
END_TEST

START_TEST(pos_wrap_twice)
{
    set_fault("pos-wrap@3", "cpu");
    ck_assert_str_eq(gt_fault_active("reference"), "");
    expect_pos_wrap("pos-wrap@3", 3, 1);
    logits *c = load_clean(f32_path, 0), *f = faulted(f32_path, 0);
    ck_assert_msg(!memcmp(c, f, sizeof *c), "GT_FAULT_BACKEND=cpu: the reference must stay clean");
    free(c);
    free(f);
}
END_TEST

/* What a session refuses, naming the entry; a harness entry (with a cell
 * glob and a kind that is not the runtime's) is left to the harness. */
static void expect_refused(const char *fault, const char *want)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) { /* the fault is parsed once per process */
        set_fault(fault, NULL);
        logits *l = malloc(sizeof *l);
        gt_err err = {{0}};
        const int rc = l ? compute(f32_path, "cpu", l, &err) : 0;
        if (rc == 0 || !strstr(err.msg, want)) {
            fprintf(stderr, "GT_FAULT=%s: rc %d, message \"%s\", want \"%s\"\n", fault, rc,
                    err.msg, want);
            _exit(1);
        }
        _exit(0);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "GT_FAULT=%s was not refused", fault);
}

START_TEST(refused)
{
    expect_refused("bogus", "'bogus': no such runtime fault");
    expect_refused("logit-scale=0.1:*/cpu/*", "'logit-scale=0.1:*/cpu/*'");
    expect_refused("token-swap=3", "'token-swap=3'");
    expect_refused("token-swap=3:9999", "token 9999 is outside the vocabulary");
    expect_refused("graph-drop-last=1", "takes no argument");
    expect_refused("kv-decode-drop=4", "kv-decode-drop@");
    expect_refused("rope-mode@x", "KIND@LAYER");
    expect_refused("pos-wrap=4096", "pos-wrap@");
    expect_refused("pos-wrap@0", "'pos-wrap@0': argument is not a number in range");
}
END_TEST

START_TEST(harness_entry_left_alone)
{
    set_fault("perturb-logits=0.1:*/cpu/*,segv:nothing", NULL);
    ck_assert_str_eq(gt_fault_active("cpu"), "");
    ck_assert(!gt_fault_is_runtime("perturb-logits=0.1:*"));
    ck_assert(gt_fault_is_runtime("token-swap=1:2"));
    logits *c = load_clean(f32_path, 1), *f = faulted(f32_path, 1);
    ck_assert_msg(!memcmp(c, f, sizeof *c), "a harness entry must not touch the runtime");
    free(c);
    free(f);
}
END_TEST

/* The clean logits, in a child that never reads GT_FAULT. */
static void write_clean(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        unsetenv("GT_FAULT");
        unsetenv("GT_FAULT_BACKEND");
        static logits l;
        const char *models[] = {f32_path, q8_path};
        for (int mi = 0; mi < 2; mi++)
            for (int bi = 0; bi < 2; bi++) {
                gt_err err = {{0}};
                FILE *f = NULL;
                if (compute(models[mi], BACKENDS[bi], &l, &err) != 0 ||
                    !(f = fopen(clean_path(models[mi], bi), "wb")) || fwrite(&l, sizeof l, 1, f) != 1) {
                    fprintf(stderr, "test_fault: clean logits on %s: %s\n", BACKENDS[bi], err.msg);
                    _exit(1);
                }
                fclose(f);
            }
        _exit(0);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "test_fault: computing the clean logits failed\n");
        exit(1);
    }
}

int main(void)
{
    const char *fork_mode = getenv("CK_FORK");
    if (fork_mode && strcmp(fork_mode, "no") == 0) {
        fprintf(stderr, "test_fault: FAIL: every case needs its own process (GT_FAULT is read "
                        "once per process); unset CK_FORK=no\n");
        return 1;
    }
    gt_err err = {{0}};
    snprintf(f32_path, sizeof f32_path, "%s", gt_test_tmp("tiny-f32.gguf"));
    snprintf(q8_path, sizeof q8_path, "%s", gt_test_tmp("tiny-q8_0.gguf"));
    if (gt_synth_write(f32_path, "tiny", 1, GT_TYPE_F32, &err) != 0 ||
        gt_synth_write(q8_path, "tiny", 1, GT_TYPE_Q8_0, &err) != 0) {
        fprintf(stderr, "test_fault: %s\n", err.msg);
        return 1;
    }
    write_clean();
    Suite *s = suite_create("fault");
    TCase *tc = tcase_create("fault");
    tcase_add_test(tc, logit_scale);
    tcase_add_test(tc, logit_scale_quant);
    tcase_add_test(tc, logit_noise);
    tcase_add_test(tc, token_swap);
    tcase_add_test(tc, const_token);
    tcase_add_test(tc, nan_at);
    tcase_add_test(tc, graph_drop_last);
    tcase_add_test(tc, kv_decode_drop);
    tcase_add_test(tc, attn_window);
    tcase_add_test(tc, pos_wrap);
    tcase_add_test(tc, pos_wrap_twice);
    tcase_add_test(tc, refused);
    tcase_add_test(tc, harness_entry_left_alone);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
