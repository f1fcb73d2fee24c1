/* cli.c: see cli.h. */
#include "cli_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double gt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int gt_cli_open(const char *verb, const char *model_path, const char *backend, int n_threads,
                const char *driver, int n_ctx, gt_cli_run *run)
{
    return gt_cli_open_seqs(verb, model_path, backend, n_threads, driver, n_ctx, 0, run);
}

int gt_cli_open_seqs(const char *verb, const char *model_path, const char *backend, int n_threads,
                     const char *driver, int n_ctx, int n_seq_max, gt_cli_run *run)
{
    memset(run, 0, sizeof *run);
    gt_err err = {{0}};
    if (!model_path) {
        fprintf(stderr, "gauntlet %s: a model is required (-m FILE.gguf)\n", verb);
        return -1;
    }
    const double t0 = gt_now();
    if (gt_model_load(model_path, &run->model, &err) != 0) {
        fprintf(stderr, "gauntlet %s: %s\n", verb, err.msg);
        return -1;
    }
    gt_backend_config cfg = {.device = 0, .n_threads = n_threads, .driver = driver};
    if (gt_backend_open(backend ? backend : "reference", &cfg, &run->backend, &err) != 0) {
        fprintf(stderr, "gauntlet %s: %s\n", verb, err.msg);
        gt_cli_close(run);
        return -1;
    }
    gt_session_params sp = {.n_ctx = n_ctx, .n_seq_max = n_seq_max};
    if (gt_session_new(run->model, run->backend, &sp, &run->session, &err) != 0) {
        fprintf(stderr, "gauntlet %s: %s\n", verb, err.msg);
        gt_cli_close(run);
        return -1;
    }
    run->load_seconds = gt_now() - t0;
    return 0;
}

void gt_cli_close(gt_cli_run *run)
{
    gt_session_free(run->session);
    gt_backend_close(run->backend);
    gt_model_free(run->model);
    memset(run, 0, sizeof *run);
}

int gt_cli_int(const char *verb, const char *opt, const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) {
        fprintf(stderr, "gauntlet %s: %s expects an integer in %ld..%ld, got '%s'\n", verb, opt,
                min, max, s);
        return -1;
    }
    *out = v;
    return 0;
}

int gt_cli_u64(const char *verb, const char *opt, const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end || s[0] == '-') {
        fprintf(stderr, "gauntlet %s: %s expects a non-negative integer, got '%s'\n", verb, opt, s);
        return -1;
    }
    *out = v;
    return 0;
}

int gt_cli_double(const char *verb, const char *opt, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end) {
        fprintf(stderr, "gauntlet %s: %s expects a number, got '%s'\n", verb, opt, s);
        return -1;
    }
    *out = v;
    return 0;
}

int32_t *gt_cli_tokenize(const char *verb, const gt_model *m, const char *text, bool no_bos,
                         int *n)
{
    const gt_tokenizer *tok = gt_model_tokenizer(m);
    const bool bos = !no_bos && gt_tokenizer_adds_bos(tok);
    gt_err err = {{0}};
    size_t len = strlen(text);
    int need = gt_tokenize(tok, text, len, bos, NULL, 0, &err);
    if (need < 0) {
        fprintf(stderr, "gauntlet %s: tokenizing: %s\n", verb, err.msg);
        return NULL;
    }
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(need > 0 ? need : 1));
    if (!ids) {
        fprintf(stderr, "gauntlet %s: out of memory\n", verb);
        return NULL;
    }
    *n = gt_tokenize(tok, text, len, bos, ids, need, &err);
    return ids;
}

int gt_cli_constraint(const char *verb, const gt_model *m, const char *schema_path,
                      bool json_object, gt_constraint **out)
{
    *out = NULL;
    gt_err err = {{0}};
    if (!schema_path && !json_object)
        return 0;
    if (schema_path && json_object) {
        fprintf(stderr, "gauntlet %s: --json-schema and --json-object exclude each other\n", verb);
        return -1;
    }
    if (json_object) {
        if (gt_constraint_json_object(m, out, &err) != 0) {
            fprintf(stderr, "gauntlet %s: --json-object: %s\n", verb, err.msg);
            return -1;
        }
        return 0;
    }
    FILE *f = fopen(schema_path, "rb");
    char *text = NULL;
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (text = malloc((size_t)n + 1)) && fread(text, 1, (size_t)n, f) == (size_t)n) {
        text[n] = '\0';
    } else {
        fprintf(stderr, "gauntlet %s: cannot read %s\n", verb, schema_path);
        if (f)
            fclose(f);
        free(text);
        return -1;
    }
    fclose(f);
    int rc = gt_constraint_from_schema(m, text, out, &err);
    free(text);
    if (rc != 0) {
        fprintf(stderr, "gauntlet %s: %s: %s\n", verb, schema_path, err.msg);
        return -1;
    }
    return 0;
}
