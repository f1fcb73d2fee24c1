/* cmd_compare.c: `gauntlet compare`, two ways:
 *   two backends on a prompt set (engine: compare.c; JSON/HTML:
 *   compare_out.c): per prompt the two texts, the first diverging token,
 *   per-token KL(A||B) teacher-forced on A's tokens, top-1 agreement and
 *   each side's speed, then a summary table;
 *   two recorded runs (--db FILE --run A --run B): cell by cell, status
 *   changes and metric deltas (reports/report_diff.c does the matching);
 *   one backend across a grid of execution settings (--sweep; engine and
 *   naming: compare_sweep.c, grid and JSON: sweep_out.c).
 * Colour only when stdout is a terminal and NO_COLOR is unset, so piped
 * output and CI logs stay plain. --quant Q quantizes the model first into a
 * temporary file by running this same binary's `quantize` verb (the one
 * implementation of llama-quantize's rules), removed afterwards. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "commands.h"
#include "compare.h"
#include "store.h"
#include "report.h"

static bool color;
#define C(code) (color ? "\033[" code "m" : "")
#define RESET C("0")
#define RED C("31")
#define GREEN C("32")
#define YELLOW C("33")
#define CYAN C("36")
#define BOLD C("1")
#define DIM C("2")

static void help(FILE *f)
{
    fprintf(f,
            "usage: gauntlet compare -m MODEL --a BACKEND[:DRIVER] --b BACKEND[:DRIVER]\n"
            "                        --prompts FILE.jsonl [-n 64] [--quant Q] [--seed S]\n"
            "                        [-t THREADS] [--html OUT] [--json OUT]\n"
            "       gauntlet compare -m MODEL --a BACKEND[:DRIVER] --b BACKEND[:DRIVER]\n"
            "                        --localize (-p TEXT [--max-tokens 32] | --passkey N\n"
            "                        [--seed S]) [--from P] [-t THREADS] [--json OUT] [--html OUT]\n"
            "       gauntlet compare --db FILE --run A --run B [--threshold PCT] [--all]\n"
            "                        [--json OUT]\n"
            "       gauntlet compare -m MODEL --b BACKEND[:DRIVER] --sweep n_batch,n_parallel,threads\n"
            "                        [-p TEXT] [--n-batch 1,7,prompt,512] [--n-parallel 1,2,4]\n"
            "                        [--threads 1,2] [--max-kld 1e-9] [--min-top1 0.95]\n"
            "                        [--a reference] [--json OUT]\n"
            "  Two backends: each prompt runs greedily on both; shows both texts, the first\n"
            "  diverging token, per-token KL(A||B) with B teacher-forced on A's tokens,\n"
            "  top-1 agreement and speed, then a summary table. Prompt lines look like\n"
            "  {\"id\": \"p01\", \"prompt\": \"...\"}. --quant quantizes MODEL to Q first.\n"
            "  --localize: where B parts from A. The prompt's tokens run once on A and\n"
            "  twice on B (once as is, once with every node fed A's inputs); one row per\n"
            "  node in graph order with NMSE, max |d| and cosine of B vs A, the NMSE the\n"
            "  node adds on identical inputs, and its op's test-ops tolerance. The first\n"
            "  node beyond tolerance on identical inputs is the divergence point; exit 1\n"
            "  when there is one, 0 when none. --passkey N: the prompt is the long suite's\n"
            "  passkey prompt of exactly N tokens (key at half depth, --seed S, default 0),\n"
            "  for a fault that shows only deep in a context. --from P: positions 0..P-1\n"
            "  only fill each side's K/V cache (in micro-batches, not compared) and\n"
            "  positions P.. are compared in one batch, with attention fed A's cache on\n"
            "  the third run; the capture then costs the memory of n - P tokens' nodes.\n"
            "  Default: 0 with -p (every token), N - 16 with --passkey.\n"
            "  Two runs: status changes and metric deltas (beyond --threshold, default 5%%;\n"
            "  --all: every metric that moved), cell by cell. Runs are ids or run keys.\n"
            "  --sweep: which execution setting breaks B. One prompt runs on A (default\n"
            "  reference) once, alone, with default settings, then on B once per cell of\n"
            "  the grid of the swept settings (n_batch: tokens per micro-batch, \"prompt\" =\n"
            "  the prompt's length; n_parallel: sequences sharing each batch; threads),\n"
            "  each a fresh B opened with them. Per cell: KL(A||B) mean over the prompt's\n"
            "  positions and top-1 agreement; a cell agrees within --max-kld and\n"
            "  --min-top1. Prints the grid and names the smallest change that breaks\n"
            "  agreement (\"diverges when the prompt (37 tokens) is split: n_batch < 37;\n"
            "  n_parallel has no effect\"), or \"agrees everywhere\". Exit 0 when every\n"
            "  cell agrees, 1 when one diverges.\n");
}

static void split_side(char *spec, const char **backend, const char **driver)
{
    char *colon = strchr(spec, ':');
    *backend = spec;
    *driver = NULL;
    if (colon) {
        *colon = '\0';
        if (colon[1])
            *driver = colon + 1;
    }
}

/* Terminal-safe: newlines and control bytes shown, not executed. */
static void plain(const char *s)
{
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '\n')
            fputs("\\n", stdout);
        else if (ch == '\t')
            fputs("\\t", stdout);
        else if (ch < 0x20 || ch == 0x7F)
            printf("\\x%02x", ch);
        else
            putchar(ch);
    }
}

static void side_text(gt_cmp *c, const gt_cmp_side_out *s, int diverge, const char *col)
{
    char piece[256];
    for (int i = 0; i < s->n_tokens; i++) {
        if (i == diverge)
            fputs(col, stdout);
        gt_cmp_piece(c, s->tokens[i], piece, sizeof piece);
        plain(piece);
    }
    fputs(RESET, stdout);
    putchar('\n');
}

static void spark(const double *v, int n, double max)
{
    static const char *const bars[] = {"\u2581", "\u2582", "\u2583", "\u2584",
                                       "\u2585", "\u2586", "\u2587", "\u2588"};
    for (int i = 0; i < n; i++) {
        int k = max > 0 ? (int)(v[i] / max * 7.999) : 0;
        fputs(bars[k < 0 ? 0 : k > 7 ? 7 : k], stdout);
    }
}

static int quantize_to(const char *model, const char *q, char *dir, size_t dcap, char *out,
                       size_t ocap)
{
    snprintf(dir, dcap, "/tmp/gauntlet-compare-XXXXXX");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "gauntlet compare: cannot make a temporary folder: %s\n", strerror(errno));
        return -1;
    }
    snprintf(out, ocap, "%s/model-%s.gguf", dir, q);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "gauntlet compare: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        execl("/proc/self/exe", "gauntlet", "quantize", "--quiet", model, out, q, (char *)NULL);
        fprintf(stderr, "gauntlet compare: cannot run quantize: %s\n", strerror(errno));
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "gauntlet compare: quantizing %s to %s failed\n", model, q);
        return -1;
    }
    return 0;
}

static int write_file(const char *path, const gt_cmp_report *rep, bool html)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;
    gt_err err = {{0}};
    if (!f) {
        fprintf(stderr, "gauntlet compare: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    int rc = html ? gt_cmp_write_html(rep, f, &err) : gt_cmp_write_json(rep, f, &err);
    if (f != stdout && fclose(f) != 0)
        rc = -1;
    if (rc != 0)
        fprintf(stderr, "gauntlet compare: writing %s failed %s\n", path, err.msg);
    return rc;
}

static int compare_backends(const gt_cmp_spec *spec, const char *quant, const char *prompts,
                            const char *label_a, const char *label_b, const char *html,
                            const char *json)
{
    gt_err err = {{0}};
    gt_cmp_prompt *ps = NULL;
    int np = 0, rc = GT_EXIT_USAGE;
    if (gt_cmp_prompts_load(prompts, &ps, &np, &err) != 0) {
        fprintf(stderr, "gauntlet compare: %s\n", err.msg);
        return GT_EXIT_USAGE;
    }
    char dir[64] = "", qpath[128] = "";
    gt_cmp_spec s = *spec;
    gt_cmp *c = NULL;
    gt_cmp_result *res = calloc((size_t)np, sizeof *res);
    int done = 0;
    if (!res)
        goto out;
    if (quant) {
        if (quantize_to(spec->model_path, quant, dir, sizeof dir, qpath, sizeof qpath) != 0)
            goto out;
        s.model_path = qpath;
    }
    if (gt_cmp_open(&s, &c, &err) != 0) {
        fprintf(stderr, "gauntlet compare: %s\n", err.msg);
        goto out;
    }
    bool to_stdout = (json && !strcmp(json, "-")) || (html && !strcmp(html, "-"));
    FILE *tty = to_stdout ? stderr : stdout;
    (void)tty;
    double kmax = 0;
    for (int i = 0; i < np; i++, done++) {
        if (gt_cmp_run(c, &ps[i], &res[i], &err) != 0) {
            fprintf(stderr, "gauntlet compare: %s\n", err.msg);
            rc = GT_EXIT_FAIL;
            goto out;
        }
        if (res[i].kld_max > kmax)
            kmax = res[i].kld_max;
    }
    if (!to_stdout) {
        char pa[256], pb[256];
        for (int i = 0; i < np; i++) {
            const gt_cmp_result *x = &res[i];
            printf("%s== %s ==%s \"", BOLD, x->prompt->id, RESET);
            plain(x->prompt->text);
            printf("\" (%d prompt tokens)\n", x->n_prompt_tokens);
            printf("  %sA %-14s%s| ", YELLOW, label_a, RESET);
            side_text(c, &x->a, x->diverge, YELLOW);
            printf("  %sB %-14s%s| ", CYAN, label_b, RESET);
            side_text(c, &x->b, x->diverge, CYAN);
            if (x->diverge < 0) {
                printf("  %sidentical over %d tokens%s\n", GREEN, x->a.n_tokens, RESET);
            } else {
                gt_cmp_piece(c, x->div_a, pa, sizeof pa);
                gt_cmp_piece(c, x->div_b, pb, sizeof pb);
                printf("  %sfirst divergence at token %d%s: A %d \"", RED, x->diverge, RESET,
                       x->div_a);
                plain(pa);
                printf("\" vs B %d \"", x->div_b);
                plain(pb);
                printf("\"\n");
            }
            printf("  KL(A||B) mean %.3g max %.3g nats (token %d), top-1 agreement %.1f%%, "
                   "decode A %.1f tok/s, B %.1f tok/s\n  KL per token ",
                   x->kld_mean, x->kld_max, x->kld_argmax, 100 * x->top1, x->a.decode_tps,
                   x->b.decode_tps);
            spark(x->kld, x->a.n_tokens, kmax);
            printf("\n\n");
        }
        printf("%s%-16s %10s %10s %10s %8s %10s %10s%s\n", BOLD, "prompt", "diverges", "KL mean",
               "KL max", "top-1", "A tok/s", "B tok/s", RESET);
        int same = 0;
        for (int i = 0; i < np; i++) {
            const gt_cmp_result *x = &res[i];
            char dv[16];
            if (x->diverge < 0)
                snprintf(dv, sizeof dv, "-");
            else
                snprintf(dv, sizeof dv, "%d", x->diverge);
            same += x->diverge < 0;
            printf("%-16.16s %s%10s%s %10.3g %10.3g %7.1f%% %10.1f %10.1f\n", x->prompt->id,
                   x->diverge < 0 ? GREEN : RED, dv, RESET, x->kld_mean, x->kld_max,
                   100 * x->top1, x->a.decode_tps, x->b.decode_tps);
        }
        printf("%d of %d prompts identical (A = %s, B = %s)\n", same, np, label_a, label_b);
    }
    gt_cmp_report rep = {spec, quant, label_a, label_b, res, np, c};
    rc = GT_EXIT_OK;
    if (json && write_file(json, &rep, false) != 0)
        rc = GT_EXIT_USAGE;
    if (html && write_file(html, &rep, true) != 0)
        rc = GT_EXIT_USAGE;
out:
    for (int i = 0; res && i < done; i++)
        gt_cmp_result_free(&res[i]);
    free(res);
    gt_cmp_close(c);
    gt_cmp_prompts_free(ps, np);
    if (qpath[0])
        unlink(qpath);
    if (dir[0])
        rmdir(dir);
    return rc;
}

/* What --localize runs on: -p TEXT (at most max_tokens of it), or
 * passkey > 0 tokens of the passkey prompt; from < 0: the default. */
typedef struct loc_args {
    const char *text;
    int max_tokens, passkey, from;
    uint64_t seed;
} loc_args;

/* The prompt's tokens (malloc'ed), or NULL having said why. */
static int32_t *loc_tokens(const gt_model *m, const loc_args *la, int *n)
{
    if (!la->passkey) {
        int32_t *tok = gt_cli_tokenize("compare", m, la->text, false, n);
        if (tok && *n > la->max_tokens)
            *n = la->max_tokens;
        return tok;
    }
    gt_passkey pk;
    gt_err err = {{0}};
    if (gt_passkey_build(m, la->passkey, 0.5, la->seed, &pk, &err) != 0) {
        fprintf(stderr, "gauntlet compare: --passkey %d: %s\n", la->passkey, err.msg);
        return NULL;
    }
    *n = pk.n;
    return pk.tokens; /* ownership passes to the caller; nothing else to free */
}

static int localize(const gt_cmp_spec *spec, const loc_args *la, const char *label_a,
                    const char *label_b, const char *html, const char *json)
{
    gt_cli_run a = {0}, b = {0};
    gt_loc_result r = {0};
    int32_t *tok = NULL;
    int n = 0, rc = GT_EXIT_USAGE;
    if (gt_cli_open("compare", spec->model_path, spec->backend_a, spec->n_threads, spec->driver_a,
                    0, &a) != 0 ||
        gt_cli_open("compare", spec->model_path, spec->backend_b, spec->n_threads, spec->driver_b,
                    0, &b) != 0)
        goto out;
    tok = loc_tokens(a.model, la, &n);
    if (!tok)
        goto out;
    const int from = la->from >= 0 ? la->from : la->passkey && n > 16 ? n - 16 : 0;
    if (from >= n) {
        fprintf(stderr, "gauntlet compare: --from %d is not before the prompt's end (%d tokens)\n",
                from, n);
        goto out;
    }
    FILE *info = (json && !strcmp(json, "-")) || (html && !strcmp(html, "-")) ? stderr : stdout;
    if (from > 0)
        fprintf(stderr, "gauntlet compare: localizing over positions %d..%d of %d tokens: %s, "
                        "then %s twice...\n",
                from, n - 1, n, label_a, label_b);
    else
        fprintf(stderr, "gauntlet compare: localizing over %d tokens: %s, then %s twice...\n", n,
                label_a, label_b);
    gt_err err = {{0}};
    if (gt_loc_run(a.model, a.backend, b.model, b.backend, tok, n, from, &r, &err) != 0) {
        fprintf(stderr, "gauntlet compare: %s\n", err.msg);
        rc = GT_EXIT_FAIL;
        goto out;
    }
    gt_loc_print_table(&r, label_a, label_b, info);
    rc = r.first_added >= 0 ? GT_EXIT_FAIL : GT_EXIT_OK;
    const char *outs[2] = {json, html};
    for (int k = 0; k < 2; k++) {
        if (!outs[k])
            continue;
        FILE *f = strcmp(outs[k], "-") ? fopen(outs[k], "w") : stdout;
        int w = -1;
        if (f)
            w = k ? gt_loc_write_html(&r, spec->model_path, label_a, label_b, f, &err)
                  : gt_loc_write_json(&r, spec->model_path, label_a, label_b, f, &err);
        if (f && f != stdout && fclose(f) != 0)
            w = -1;
        if (w != 0) {
            fprintf(stderr, "gauntlet compare: cannot write %s: %s\n", outs[k],
                    f ? err.msg : strerror(errno));
            rc = GT_EXIT_USAGE;
        }
    }
out:
    gt_loc_result_free(&r);
    free(tok);
    gt_cli_close(&a);
    gt_cli_close(&b);
    return rc;
}

static int resolve_run(gt_db *db, const char *spec, int64_t *id)
{
    char *end;
    errno = 0;
    long long v = strtoll(spec, &end, 10);
    if (!errno && end != spec && !*end && v > 0) {
        *id = v;
        return 0;
    }
    gt_db_run r;
    gt_err err = {{0}};
    if (gt_db_run_get(db, spec, &r, &err) == 0) {
        *id = r.id;
        return 0;
    }
    fprintf(stderr, "gauntlet compare: no run '%s' in %s\n", spec, gt_db_path(db));
    return -1;
}

static int compare_runs(const char *db_path, const char *ra, const char *rb, double threshold,
                        bool all, const char *json)
{
    gt_err err = {{0}};
    gt_db *db = NULL;
    gt_rep_run *a = NULL, *b = NULL;
    gt_rep_diff *d = NULL;
    int64_t ia, ib;
    int rc = GT_EXIT_USAGE;
    if (gt_db_open(db_path, true, &db, &err) != 0) {
        fprintf(stderr, "gauntlet compare: %s\n", err.msg);
        return GT_EXIT_USAGE;
    }
    if (resolve_run(db, ra, &ia) != 0 || resolve_run(db, rb, &ib) != 0)
        goto out;
    if (gt_report_load(db, ia, false, NULL, 0, &a, &err) != 0 ||
        gt_report_load(db, ib, false, NULL, 0, &b, &err) != 0 ||
        gt_report_diff(b, a, threshold, &d, &err) != 0) {
        fprintf(stderr, "gauntlet compare: %s\n", err.msg);
        goto out;
    }
    const double thr = d->threshold_pct;
    printf("%sA%s run %lld %s (git %s, %d cells)\n%sB%s run %lld %s (git %s, %d cells)\n\n", BOLD,
           RESET, (long long)a->id, a->run_key, a->git_sha, a->n, BOLD, RESET, (long long)b->id,
           b->run_key, b->git_sha, b->n);
    printf("%sstatus changes: %d%s (%d new failures, %d fixed)\n", BOLD, d->n_status, RESET,
           d->n_new_fail, d->n_fix);
    for (int i = 0; i < d->n_status; i++) {
        const gt_rep_status_delta *s = &d->status[i];
        const char *col = s->kind == GT_CH_NEW_FAILURE ? RED : s->kind == GT_CH_FIX ? GREEN : "";
        printf("  %-44s %-8s -> %s%-8s%s %s\n", (s->cur ? s->cur : s->base)->cell_id,
               s->base ? s->base->status : "-", col, s->cur ? s->cur->status : "-", RESET,
               gt_report_change_name(s->kind));
    }
    int shown = 0;
    for (int i = 0; i < d->n_all; i++) {
        const gt_rep_metric_delta *m = &d->all[i];
        if (all ? m->change_pct == 0 : !(fabs(m->change_pct) > thr))
            continue;
        if (shown++ == 0)
            printf("\n%smetric deltas%s%s\n  %-44s %-32s %12s %12s %9s\n", BOLD,
                   all ? "" : " beyond the threshold", RESET, "cell", "metric", "A", "B",
                   "change");
        char label[256], va[32], vb[32];
        gt_report_metric_label(m->m, label, sizeof label);
        gt_report_num(m->bm->value, va, sizeof va);
        gt_report_num(m->m->value, vb, sizeof vb);
        const char *col = m->worse_pct > thr ? RED : m->worse_pct < -thr ? GREEN : "";
        printf("  %-44s %-32s %12s %12s %s%+8.1f%%%s\n", m->cur->cell_id, label, va, vb, col,
               m->change_pct, RESET);
    }
    if (!shown)
        printf("\nno metric moved by more than %.1f%%\n", thr);
    if (json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddNumberToObject(root, "run_a", (double)a->id);
        cJSON_AddNumberToObject(root, "run_b", (double)b->id);
        cJSON_AddNumberToObject(root, "threshold_pct", thr);
        cJSON *ch = cJSON_AddArrayToObject(root, "status_changes");
        for (int i = 0; i < d->n_status; i++) {
            const gt_rep_status_delta *s = &d->status[i];
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "cell_id", (s->cur ? s->cur : s->base)->cell_id);
            cJSON_AddStringToObject(e, "kind", gt_report_change_name(s->kind));
            cJSON_AddStringToObject(e, "a", s->base ? s->base->status : "");
            cJSON_AddStringToObject(e, "b", s->cur ? s->cur->status : "");
            cJSON_AddItemToArray(ch, e);
        }
        cJSON *ms = cJSON_AddArrayToObject(root, "metric_deltas");
        for (int i = 0; i < d->n_all; i++) {
            const gt_rep_metric_delta *m = &d->all[i];
            if (m->change_pct == 0)
                continue;
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "cell_id", m->cur->cell_id);
            cJSON_AddStringToObject(e, "suite", m->m->suite);
            cJSON_AddStringToObject(e, "name", m->m->name);
            cJSON_AddNumberToObject(e, "a", m->bm->value);
            cJSON_AddNumberToObject(e, "b", m->m->value);
            if (isfinite(m->change_pct))
                cJSON_AddNumberToObject(e, "change_pct", m->change_pct);
            else
                cJSON_AddNullToObject(e, "change_pct");
            cJSON_AddBoolToObject(e, "beyond_threshold", fabs(m->change_pct) > thr);
            cJSON_AddItemToArray(ms, e);
        }
        char *text = cJSON_Print(root);
        cJSON_Delete(root);
        FILE *f = strcmp(json, "-") ? fopen(json, "w") : stdout;
        if (!f || !text) {
            fprintf(stderr, "gauntlet compare: cannot write %s\n", json);
            free(text);
            goto out;
        }
        fprintf(f, "%s\n", text);
        free(text);
        if (f != stdout)
            fclose(f);
    }
    rc = GT_EXIT_OK;
out:
    gt_report_diff_free(d);
    gt_report_free(a);
    gt_report_free(b);
    gt_db_close(db);
    return rc;
}


static int sweep(const gt_sweep_spec *spec, const char *json)
{
    gt_err err = {{0}};
    gt_sweep_grid g;
    if (gt_sweep_run(spec, &g, &err) != 0) {
        fprintf(stderr, "gauntlet compare: %s\n", err.msg);
        return GT_EXIT_USAGE;
    }
    gt_sweep_verdict v;
    gt_sweep_name(&g, &v);
    const bool to_stdout = json && !strcmp(json, "-");
    gt_sweep_print(spec, &g, &v, color && !to_stdout, to_stdout ? stderr : stdout);
    int rc = v.agrees ? GT_EXIT_OK : GT_EXIT_FAIL;
    if (json) {
        FILE *f = to_stdout ? stdout : fopen(json, "w");
        int w = f ? gt_sweep_write_json(spec, &g, &v, f, &err) : -1;
        if (f && f != stdout && fclose(f) != 0)
            w = -1;
        if (w != 0) {
            fprintf(stderr, "gauntlet compare: cannot write %s: %s\n", json,
                    f ? err.msg : strerror(errno));
            rc = GT_EXIT_USAGE;
        }
    }
    gt_sweep_grid_free(&g);
    return rc;
}

int cmd_compare(int argc, char **argv)
{
    const char *model = NULL, *quant = NULL, *prompts = NULL, *html = NULL, *json = NULL;
    const char *db = NULL, *runs[2] = {NULL, NULL}, *prompt = NULL;
    const char *sweep_arg = NULL, *nb_arg = NULL, *np_arg = NULL, *threads_arg = NULL;
    double max_kld = -1, min_top1 = -1;
    bool loc = false;
    long max_tokens = 32, passkey = 0, from = -1;
    char *side_a = NULL, *side_b = NULL;
    long n = 64, threads = 0;
    uint64_t seed = 0;
    double threshold = -1;
    bool all = false;
    int n_runs = 0;
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},   {"a", required_argument, 0, 'A'},
        {"b", required_argument, 0, 'B'},       {"quant", required_argument, 0, 'q'},
        {"prompts", required_argument, 0, 'F'}, {"prompt", required_argument, 0, 'p'},
        {"localize", no_argument, 0, 'L'},      {"max-tokens", required_argument, 0, 'M'}, {"n", required_argument, 0, 'n'},
        {"seed", required_argument, 0, 's'},    {"threads", required_argument, 0, 't'},
        {"html", required_argument, 0, 'H'},    {"json", required_argument, 0, 'j'},
        {"db", required_argument, 0, 'd'},      {"run", required_argument, 0, 'r'},
        {"threshold", required_argument, 0, 'T'}, {"all", no_argument, 0, 'a'},
        {"sweep", required_argument, 0, 'S'},   {"n-batch", required_argument, 0, 'N'},
        {"n-parallel", required_argument, 0, 'P'}, {"max-kld", required_argument, 0, 'K'},
        {"min-top1", required_argument, 0, 'O'},
        {"passkey", required_argument, 0, 'k'}, {"from", required_argument, 0, 'f'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "m:n:t:p:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'A': side_a = optarg; break;
        case 'B': side_b = optarg; break;
        case 'q': quant = optarg; break;
        case 'F': prompts = optarg; break;
        case 'p': prompt = optarg; break;
        case 'L': loc = true; break;
        case 'M': if (gt_cli_int("compare", "--max-tokens", optarg, 1, 4096, &max_tokens)) return GT_EXIT_USAGE; break;
        case 'k': if (gt_cli_int("compare", "--passkey", optarg, 1, 1 << 20, &passkey)) return GT_EXIT_USAGE; break;
        case 'f': if (gt_cli_int("compare", "--from", optarg, 0, 1 << 20, &from)) return GT_EXIT_USAGE; break;
        case 'n': if (gt_cli_int("compare", "-n", optarg, 1, 1 << 16, &n)) return GT_EXIT_USAGE; break;
        case 's': if (gt_cli_u64("compare", "--seed", optarg, &seed)) return GT_EXIT_USAGE; break;
        case 't': threads_arg = optarg; break; /* a list under --sweep threads */
        case 'S': sweep_arg = optarg; break;
        case 'N': nb_arg = optarg; break;
        case 'P': np_arg = optarg; break;
        case 'K': if (gt_cli_double("compare", "--max-kld", optarg, &max_kld) || max_kld < 0) return GT_EXIT_USAGE; break;
        case 'O': if (gt_cli_double("compare", "--min-top1", optarg, &min_top1) || min_top1 < 0 || min_top1 > 1) return GT_EXIT_USAGE; break;
        case 'H': html = optarg; break;
        case 'j': json = optarg; break;
        case 'd': db = optarg; break;
        case 'r':
            if (n_runs == 2) {
                fprintf(stderr, "gauntlet compare: --run is given exactly twice\n");
                return GT_EXIT_USAGE;
            }
            runs[n_runs++] = optarg;
            break;
        case 'T': if (gt_cli_double("compare", "--threshold", optarg, &threshold)) return GT_EXIT_USAGE; break;
        case 'a': all = true; break;
        case 'h': help(stdout); return GT_EXIT_OK;
        default: help(stderr); return GT_EXIT_USAGE;
        }
    }
    const char *nc = getenv("NO_COLOR");
    color = isatty(STDOUT_FILENO) && !(nc && nc[0]);
    if (optind < argc) {
        fprintf(stderr, "gauntlet compare: unexpected argument '%s'\n", argv[optind]);
        return GT_EXIT_USAGE;
    }
    if (sweep_arg) {
        if (!model || !side_b || db || prompts || loc) {
            fprintf(stderr, "gauntlet compare: --sweep needs -m MODEL and --b BACKEND (and no "
                            "--db, --prompts or --localize)\n");
            return GT_EXIT_USAGE;
        }
        gt_sweep_spec spec;
        gt_sweep_defaults(&spec);
        gt_err err = {{0}};
        const char *lists[GT_SW_N_AXES] = {nb_arg, np_arg, threads_arg};
        if (gt_sweep_axes_parse(sweep_arg, spec.swept, &err) != 0)
            goto sweep_usage;
        for (int a = 0; a < GT_SW_N_AXES; a++) {
            if (lists[a] && spec.swept[a] &&
                gt_sweep_values_parse((gt_sweep_axis)a, lists[a], spec.values[a],
                                      &spec.n_values[a], &err) != 0)
                goto sweep_usage;
            if (lists[a] && !spec.swept[a] && a != GT_SW_THREADS) {
                gt_err_set(&err, "--%s %s: that setting is not in --sweep %s",
                           a == GT_SW_N_BATCH ? "n-batch" : "n-parallel", lists[a], sweep_arg);
                goto sweep_usage;
            }
        }
        if (threads_arg && !spec.swept[GT_SW_THREADS]) {
            if (gt_cli_int("compare", "-t", threads_arg, 0, 1024, &threads))
                return GT_EXIT_USAGE;
            spec.n_threads = (int)threads;
        }
        spec.model_path = model;
        spec.prompt = prompt ? prompt : GT_SWEEP_PROMPT;
        if (side_a)
            split_side(side_a, &spec.ref_backend, &spec.ref_driver);
        split_side(side_b, &spec.backend, &spec.driver);
        if (max_kld >= 0)
            spec.max_kld = max_kld;
        if (min_top1 >= 0)
            spec.min_top1 = min_top1;
        return sweep(&spec, json);
    sweep_usage:
        fprintf(stderr, "gauntlet compare: %s\n", err.msg);
        return GT_EXIT_USAGE;
    }
    if (nb_arg || np_arg || max_kld >= 0 || min_top1 >= 0) {
        fprintf(stderr, "gauntlet compare: --n-batch, --n-parallel, --max-kld and --min-top1 go "
                        "with --sweep\n");
        return GT_EXIT_USAGE;
    }
    if (threads_arg && gt_cli_int("compare", "-t", threads_arg, 0, 1024, &threads))
        return GT_EXIT_USAGE;
    if (db) {
        if (n_runs != 2 || model) {
            fprintf(stderr, "gauntlet compare: --db FILE needs --run A --run B (and no -m)\n");
            return GT_EXIT_USAGE;
        }
        return compare_runs(db, runs[0], runs[1], threshold, all, json);
    }
    if ((passkey || from >= 0) && !loc) {
        fprintf(stderr, "gauntlet compare: --passkey and --from go with --localize\n");
        return GT_EXIT_USAGE;
    }
    if (loc) {
        if (!model || !side_a || !side_b || !prompt == !passkey || prompts) {
            fprintf(stderr, "gauntlet compare: --localize needs -m MODEL, --a, --b and either "
                            "-p TEXT or --passkey N (one prompt, not --prompts)\n");
            return GT_EXIT_USAGE;
        }
        char la[128], lb[128];
        snprintf(la, sizeof la, "%s", side_a);
        snprintf(lb, sizeof lb, "%s", side_b);
        gt_cmp_spec spec = {.model_path = model, .n_threads = (int)threads};
        split_side(side_a, &spec.backend_a, &spec.driver_a);
        split_side(side_b, &spec.backend_b, &spec.driver_b);
        const loc_args args = {prompt, (int)max_tokens, (int)passkey, (int)from, seed};
        return localize(&spec, &args, la, lb, html, json);
    }
    if (prompt) {
        fprintf(stderr, "gauntlet compare: -p TEXT goes with --localize; a prompt set is "
                        "--prompts FILE\n");
        return GT_EXIT_USAGE;
    }
    if (!model || !side_a || !side_b || !prompts) {
        fprintf(stderr, "gauntlet compare: -m MODEL, --a, --b and --prompts are required\n");
        help(stderr);
        return GT_EXIT_USAGE;
    }
    char label_a[128], label_b[128];
    snprintf(label_a, sizeof label_a, "%s", side_a);
    snprintf(label_b, sizeof label_b, "%s", side_b);
    gt_cmp_spec spec = {.model_path = model, .n_tokens = (int)n, .n_threads = (int)threads,
                        .seed = seed};
    split_side(side_a, &spec.backend_a, &spec.driver_a);
    split_side(side_b, &spec.backend_b, &spec.driver_b);
    return compare_backends(&spec, quant, prompts, label_a, label_b, html, json);
}
