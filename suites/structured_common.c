/* structured_common.c: see structured.h. */
#include "structured.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gt/backend.h"
#include "gt/sampler.h"
#include "gt/tokenizer.h"
#include "base.h"

/* A validator that runs longer than this is stuck, not slow: python and
 * jsonschema take well under a second for the committed cases. */
#define VALIDATOR_TIMEOUT_S 60

static int load_list(const cJSON *arr, const char *what, bool malformed, gt_sc_case *out,
                     int *n, const char *path, gt_err *err)
{
    *n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
    {
        if (*n == GT_SC_MAX_CASES)
            return gt_err_set(err, "%s: more than %d %s", path, GT_SC_MAX_CASES, what);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(e, "prompt");
        const cJSON *schema = cJSON_GetObjectItemCaseSensitive(e, "schema");
        const cJSON *mentions = cJSON_GetObjectItemCaseSensitive(e, "mentions");
        if (!cJSON_IsString(name) || !schema ||
            (malformed ? !cJSON_IsString(mentions) : !cJSON_IsString(prompt)))
            return gt_err_set(err, "%s: %s[%d] needs a string name, a schema and %s", path, what,
                              *n, malformed ? "a string mentions" : "a string prompt");
        gt_sc_case *k = &out[(*n)++];
        k->name = name->valuestring;
        k->prompt = malformed ? NULL : prompt->valuestring;
        k->mentions = malformed ? mentions->valuestring : NULL;
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(e, "kind");
        if (malformed && !(cJSON_IsString(kind) && (!strcmp(kind->valuestring, "invalid") ||
                                                     !strcmp(kind->valuestring, "unsupported"))))
            return gt_err_set(err, "%s: malformed[%d] needs \"kind\": \"invalid\" or "
                                   "\"unsupported\"", path, *n - 1);
        k->unsupported = malformed && !strcmp(kind->valuestring, "unsupported");
        k->schema = cJSON_PrintUnformatted(schema);
        if (!k->schema)
            return gt_err_set(err, "out of memory");
    }
    return 0;
}

int gt_sc_load(const gt_suite_ctx *c, gt_sc_set *s, gt_err *err)
{
    memset(s, 0, sizeof *s);
    const char *file = gt_suite_str(c, "cases", NULL);
    if (file)
        snprintf(s->path, sizeof s->path, "%s", file);
    else if (c->data_dir)
        snprintf(s->path, sizeof s->path, "%s/structured.json", c->data_dir);
    else
        return gt_err_set(err, "structured: no \"cases\" setting and no data folder");
    FILE *f = fopen(s->path, "rb");
    if (!f)
        return gt_err_set(err, "structured cases %s: %s", s->path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc(n > 0 ? (size_t)n + 1 : 1);
    size_t got = text && n > 0 ? fread(text, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!text)
        return gt_err_set(err, "out of memory");
    text[got] = 0;
    s->root = cJSON_Parse(text);
    free(text);
    if (!s->root)
        return gt_err_set(err, "structured cases %s: not JSON", s->path);
    if (load_list(cJSON_GetObjectItemCaseSensitive(s->root, "cases"), "cases", false, s->cases,
                  &s->n_cases, s->path, err) != 0 ||
        load_list(cJSON_GetObjectItemCaseSensitive(s->root, "malformed"), "malformed", true,
                  s->malformed, &s->n_malformed, s->path, err) != 0) {
        gt_sc_free(s);
        return -1;
    }
    if (s->n_cases == 0) {
        gt_sc_free(s);
        return gt_err_set(err, "structured cases %s: no cases", s->path);
    }
    return 0;
}

void gt_sc_free(gt_sc_set *s)
{
    for (int i = 0; i < s->n_cases; i++)
        free(s->cases[i].schema);
    for (int i = 0; i < s->n_malformed; i++)
        free(s->malformed[i].schema);
    cJSON_Delete(s->root);
    memset(s, 0, sizeof *s);
}

int gt_sc_generate(gt_session *s, gt_constraint *con, const int32_t *ids, int n_ids,
                   int max_tokens, gt_sc_answer *out, gt_err *err)
{
    const int n_vocab = gt_model_hparams(gt_session_model(s))->n_vocab;
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    if (!logits)
        return gt_err_set(err, "out of memory");
    out->n = 0;
    out->complete = false;
    gt_constraint_reset(con);
    int rc = -1;
    if (gt_session_truncate(s, 0, err) != 0 ||
        gt_session_eval(s, ids, n_ids, false, logits, err) != 0)
        goto done;
    while (out->n < max_tokens) {
        if (gt_constraint_mask(con, logits) == 0) {
            gt_err_set(err, "the constraint allows no token after %d tokens", out->n);
            goto done;
        }
        const int32_t next = gt_argmax(logits, n_vocab);
        if (gt_constraint_is_end(con, next))
            break;
        if (gt_constraint_accept(con, next, err) != 0)
            goto done;
        out->tokens[out->n++] = next;
        if (out->n < max_tokens && gt_session_eval(s, &next, 1, false, logits, err) != 0)
            goto done;
    }
    out->complete = gt_constraint_done(con);
    rc = 0;
done:
    free(logits);
    return rc;
}

char *gt_sc_text(const gt_model *m, const int32_t *tokens, int n)
{
    const gt_tokenizer *tok = gt_model_tokenizer(m);
    size_t cap = 64, len = 0;
    char *s = malloc(cap);
    for (int i = 0; s && i < n; i++) {
        char piece[256];
        int k = gt_token_to_bytes(tok, tokens[i], piece, sizeof piece);
        if (k < 0)
            k = 0;
        if (k > (int)sizeof piece)
            k = (int)sizeof piece;
        if (len + (size_t)k + 1 > cap) {
            while (len + (size_t)k + 1 > cap)
                cap *= 2;
            char *t = realloc(s, cap);
            if (!t) {
                free(s);
                return NULL;
            }
            s = t;
        }
        memcpy(s + len, piece, (size_t)k);
        len += (size_t)k;
    }
    if (s)
        s[len] = 0;
    return s;
}

/* Stored per case: n, complete, then max_tokens token slots. */
static size_t ref_stride(int max_tokens) { return 2 + (size_t)max_tokens; }

static int compute_reference(const gt_model *m, const gt_sc_set *s, int32_t *const *ids,
                             const int *n_ids, int max_tokens, int32_t *buf, gt_err *err)
{
    int longest = 0;
    for (int i = 0; i < s->n_cases; i++)
        longest = n_ids[i] > longest ? n_ids[i] : longest;
    gt_backend *ref = NULL;
    gt_session *sess = NULL;
    gt_backend_config cfg = {0};
    gt_session_params sp = {.n_ctx = longest + max_tokens + 1};
    if (gt_backend_open("reference", &cfg, &ref, err) != 0 ||
        gt_session_new(m, ref, &sp, &sess, err) != 0) {
        gt_backend_close(ref);
        return gt_err_wrap(err, "reference backend");
    }
    int rc = 0;
    for (int i = 0; i < s->n_cases && rc == 0; i++) {
        gt_constraint *con = NULL;
        int32_t *row = buf + (size_t)i * ref_stride(max_tokens);
        gt_sc_answer a = {.tokens = row + 2};
        rc = gt_constraint_from_schema(m, s->cases[i].schema, &con, err);
        if (rc == 0)
            rc = gt_sc_generate(sess, con, ids[i], n_ids[i], max_tokens, &a, err);
        gt_constraint_free(con);
        row[0] = a.n;
        row[1] = a.complete;
        if (rc != 0)
            gt_err_wrap(err, "reference backend, case %s", s->cases[i].name);
    }
    gt_session_free(sess);
    gt_backend_close(ref);
    return rc;
}

int gt_sc_reference(gt_suite_ctx *c, const gt_model *m, const gt_sc_set *s,
                    int32_t *const *ids, const int *n_ids, int max_tokens,
                    const gt_sc_answer *own, gt_sc_answer *out, bool *cached, gt_err *err)
{
    gt_sha256 h;
    gt_sha256_init(&h);
    for (int i = 0; i < s->n_cases; i++) {
        gt_sha256_update(&h, &n_ids[i], sizeof n_ids[i]);
        gt_sha256_update(&h, ids[i], (size_t)n_ids[i] * sizeof *ids[i]);
        gt_sha256_update(&h, s->cases[i].schema, strlen(s->cases[i].schema) + 1);
    }
    char data_hash[65], settings[64], key[65];
    gt_sha256_final_hex(&h, data_hash);
    snprintf(settings, sizeof settings, "max_tokens=%d", max_tokens);
    gt_suite_ref_key(c, "structured-greedy", data_hash, settings, key);
    const size_t want = (size_t)s->n_cases * ref_stride(max_tokens) * sizeof(int32_t);
    void *data = NULL;
    size_t size = 0;
    const int got = gt_suite_ref_get(c, key, &data, &size, err);
    if (got < 0)
        return -1;
    *cached = got == 0 && size == want;
    int32_t *buf = *cached ? data : calloc(1, want);
    if (!*cached)
        free(data);
    if (!buf)
        return gt_err_set(err, "out of memory");
    if (!*cached) {
        int rc = 0;
        if (own) {
            for (int i = 0; i < s->n_cases; i++) {
                int32_t *row = buf + (size_t)i * ref_stride(max_tokens);
                row[0] = own[i].n;
                row[1] = own[i].complete;
                memcpy(row + 2, own[i].tokens, (size_t)own[i].n * sizeof *row);
            }
        } else {
            rc = compute_reference(m, s, ids, n_ids, max_tokens, buf, err);
        }
        if (rc != 0 || gt_suite_ref_put(c, key, "structured constrained greedy answers (int32: "
                                                "n, complete, max_tokens ids per case)",
                                        buf, want, err) != 0) {
            free(buf);
            return -1;
        }
    }
    int rc = 0;
    for (int i = 0; i < s->n_cases; i++) {
        const int32_t *row = buf + (size_t)i * ref_stride(max_tokens);
        out[i].n = row[0] >= 0 && row[0] <= max_tokens ? row[0] : 0;
        out[i].complete = row[1] != 0;
        out[i].tokens = malloc(((size_t)out[i].n + 1) * sizeof *out[i].tokens);
        if (!out[i].tokens) {
            rc = gt_err_set(err, "out of memory");
            continue;
        }
        memcpy(out[i].tokens, row + 2, (size_t)out[i].n * sizeof *row);
    }
    free(buf);
    return rc;
}

static int write_text(const char *path, const char *text, gt_err *err)
{
    FILE *f = fopen(path, "wb");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        if (f)
            fclose(f);
        return gt_err_set(err, "writing %s: %s", path, strerror(errno));
    }
    return 0;
}

static void oracle_path(char *out, size_t cap)
{
    const char *env = getenv("GT_PYORACLE"), *xdg = getenv("XDG_CACHE_HOME");
    if (env && env[0])
        snprintf(out, cap, "%s", env);
    else if (xdg && xdg[0])
        snprintf(out, cap, "%s/gauntlet/pyoracle", xdg);
    else
        snprintf(out, cap, "%s/.cache/gauntlet/pyoracle", getenv("HOME") ? getenv("HOME") : "");
}

/* Runs argv with stdout and stderr into out_path; the exit status, or -1
 * with err when it could not start, was killed or ran past the timeout. */
static int run_validator(char **argv, const char *out_path, gt_err *err)
{
    char oracle[1024];
    oracle_path(oracle, sizeof oracle);
    pid_t pid = fork();
    if (pid < 0)
        return gt_err_set(err, "fork: %s", strerror(errno));
    if (pid == 0) {
        FILE *o = freopen(out_path, "wb", stdout);
        if (!o || dup2(fileno(stdout), 2) < 0)
            _exit(126);
        setenv("PYTHONPATH", oracle, 1);
        execvp(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int status = 0;
    const struct timespec tick = {0, 20 * 1000 * 1000};
    for (int waited = 0;; waited++) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR)
            return gt_err_set(err, "waitpid: %s", strerror(errno));
        if (waited * 20 > VALIDATOR_TIMEOUT_S * 1000) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return gt_err_set(err, "the validator %s ran past %d s", argv[0],
                              VALIDATOR_TIMEOUT_S);
        }
        nanosleep(&tick, NULL);
    }
    if (!WIFEXITED(status))
        return gt_err_set(err, "the validator %s died of signal %d", argv[0], WTERMSIG(status));
    return WEXITSTATUS(status);
}

/* The start of what the validator printed, newlines as spaces. */
static void first_lines(const char *path, char *out, size_t cap)
{
    out[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    size_t n = fread(out, 1, cap - 1, f);
    fclose(f);
    out[n] = 0;
}

static void one_line(const char *in, char *out, size_t cap)
{
    size_t k = 0;
    for (; in[k] && k + 1 < cap; k++)
        out[k] = in[k] == '\n' ? ' ' : in[k];
    out[k] = 0;
}

int gt_sc_validate(const gt_suite_ctx *c, const gt_sc_case *cases, int n, char *const *docs,
                   bool *valid, char (*why)[256], gt_err *err)
{
    const char *tmp = getenv("TMPDIR");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/gt-structured-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return gt_err_set(err, "mkdtemp %s: %s", dir, strerror(errno));
    char script[1024];
    snprintf(script, sizeof script, "%s/jsonschema_validate.py", c->data_dir ? c->data_dir : ".");
    const cJSON *given = gt_suite_setting(c, "validator");
    char *argv[8 + 2 * GT_SC_MAX_CASES + 1];
    int argc = 0;
    const cJSON *a;
    if (given) {
        cJSON_ArrayForEach(a, given)
        if (argc < 8)
            argv[argc++] = a->valuestring;
    } else {
        argv[argc++] = "python3";
        argv[argc++] = script;
    }
    char paths[2 * GT_SC_MAX_CASES][1100];
    int rc = argc == 0 ? gt_err_set(err, "structured settings: validator is empty") : 0;
    if (n > GT_SC_MAX_CASES)
        rc = gt_err_set(err, "more than %d documents to validate", GT_SC_MAX_CASES);
    for (int i = 0; i < n && rc == 0; i++) {
        snprintf(paths[2 * i], sizeof paths[0], "%s/%s.schema.json", dir, cases[i].name);
        snprintf(paths[2 * i + 1], sizeof paths[0], "%s/%s.doc.json", dir, cases[i].name);
        rc = write_text(paths[2 * i], cases[i].schema, err);
        if (rc == 0)
            rc = write_text(paths[2 * i + 1], docs[i] ? docs[i] : "", err);
        argv[argc++] = paths[2 * i];
        argv[argc++] = paths[2 * i + 1];
    }
    argv[argc] = NULL;
    char out_path[1100], out[8192];
    snprintf(out_path, sizeof out_path, "%s/validator.out", dir);
    int st = rc == 0 ? run_validator(argv, out_path, err) : -1;
    first_lines(out_path, out, sizeof out);
    if (st == 0 || st == 1) {
        /* one line per pair, in order: "ok DOC" or "FAIL DOC...: why" */
        char *save = NULL, *line = strtok_r(out, "\n", &save);
        for (int i = 0; i < n; i++, line = line ? strtok_r(NULL, "\n", &save) : NULL) {
            valid[i] = line && strncmp(line, "ok ", 3) == 0;
            const char *colon = line ? strstr(line, ": ") : NULL;
            snprintf(why[i], sizeof why[i], "%s",
                     valid[i] ? "" : colon ? colon + 2 : line ? line : "no verdict printed");
        }
        rc = 0;
    } else if (st > 1) {
        char first[300];
        one_line(out, first, sizeof first);
        rc = gt_err_set(err, "the validator (%s %s) could not judge (exit %d%s): %s", argv[0],
                        given ? "..." : script, st,
                        st == 3 ? ": python's jsonschema does not import; pip install "
                                  "--target ~/.cache/gauntlet/pyoracle jsonschema==4.26.0"
                                : "",
                        first);
    } else {
        rc = -1;
    }
    for (int i = 0; i < 2 * n && i < 2 * GT_SC_MAX_CASES; i++)
        unlink(paths[i]);
    unlink(out_path);
    rmdir(dir);
    return rc;
}

/* valid_<case>: complete, and the validator accepts it. */
static void report_valid(gt_suite_ctx *c, const gt_sc_case *k, const char *doc, bool complete,
                         bool valid, const char *why)
{
    char name[96];
    snprintf(name, sizeof name, "valid_%s", k->name);
    if (!complete)
        gt_suite_check(c, name, false, "incomplete document (max_tokens reached): %.200s", doc);
    else
        gt_suite_check(c, name, valid, "%s%s%.200s", valid ? "" : why, valid ? "" : ": ", doc);
}

/* Where case k's answer parted from the reference's, appended to out. */
static void divergence(const gt_sc_case *k, const char *doc, const char *ref_doc, char *out,
                       size_t cap)
{
    size_t d = 0;
    while (doc[d] && doc[d] == ref_doc[d])
        d++;
    const size_t len = strlen(out);
    snprintf(out + len, cap - len, "%s%s parts at byte %zu: cell \"%.60s\" | reference \"%.60s\"",
             len ? "; " : "", k->name, d, doc + d, ref_doc + d);
}

void gt_sc_report_totals(gt_suite_ctx *c, int n_cases, const gt_sc_tally *t, int n_malformed,
                         int n_refused)
{
    const int n_valid = t->n_valid, n_agree = t->n_agree;
    const char *divergences = t->divergences;
    gt_suite_metric(c, "valid_rate", n_cases ? (double)n_valid / n_cases : 0);
    /* One judgment: the metric against the cell's bound (a matrix may
     * loosen it where 8-bit activations flip near-ties), and the check
     * that shows where the answers parted with the same verdict. */
    const double agree = n_cases ? (double)n_agree / n_cases : 0;
    const gt_status v = gt_suite_metric(c, "ref_agreement", agree);
    const bool ok = v == GT_ST_PASS || (v != GT_ST_FAIL && n_agree == n_cases);
    gt_suite_result(c, "agreement", ok ? GT_ST_PASS : GT_ST_FAIL,
                    "%d/%d answers are the reference's bytes%s%s", n_agree, n_cases,
                    divergences[0] ? ": " : "", divergences);
    if (n_malformed)
        gt_suite_metric(c, "refused", (double)n_refused / n_malformed);
}

int gt_sc_judge(gt_suite_ctx *c, const gt_model *m, const gt_sc_set *s, char *const *docs,
                const bool *complete, const gt_sc_answer *own, const gt_sc_answer *ref,
                gt_sc_tally *out, gt_err *err)
{
    memset(out, 0, sizeof *out);
    const int n = s->n_cases;
    char *ref_docs[GT_SC_MAX_CASES] = {0};
    bool valid[GT_SC_MAX_CASES] = {0};
    char why[GT_SC_MAX_CASES][256];
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        if (!(ref_docs[i] = gt_sc_text(m, ref[i].tokens, ref[i].n)))
            rc = gt_err_set(err, "out of memory");
    if (rc == 0 && gt_sc_validate(c, s->cases, n, docs, valid, why, err) != 0)
        rc = -1;
    for (int i = 0; i < n && rc == 0; i++) {
        /* a backend by its tokens; a server, whose tokens never cross the
         * wire, by its bytes */
        const size_t bytes = own ? (size_t)own[i].n * sizeof *own[i].tokens : 0;
        const bool agree = own ? own[i].n == ref[i].n && own[i].complete == ref[i].complete &&
                                     memcmp(own[i].tokens, ref[i].tokens, bytes) == 0
                               : ref[i].complete && complete[i] && !strcmp(docs[i], ref_docs[i]);
        report_valid(c, &s->cases[i], docs[i], complete[i], valid[i], why[i]);
        if (!agree)
            divergence(&s->cases[i], docs[i], ref_docs[i], out->divergences,
                       sizeof out->divergences);
        out->n_valid += complete[i] && valid[i];
        out->n_agree += agree;
    }
    for (int i = 0; i < n; i++)
        free(ref_docs[i]);
    return rc;
}
