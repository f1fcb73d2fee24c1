/* cmd_anchors.c: `gauntlet anchors`, measuring a model's anchors with
 * llama.cpp (matrix.h, "Anchors"): its perplexity on the anchor text with
 * llama-perplexity, and its greedy tokens on fixed prompts with llama-server,
 * for every quant the matrix runs the model at, on the very artifacts a
 * qualification runs. Prints the anchors file; nothing of gauntlet's own
 * inference is used, so the numbers are an outside judge of all backends. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "commands.h"
#include "gt/model.h"
#include "gt/tokenizer.h"
#include "matrix.h"
#include "net.h"
#include "run.h"

/* Prompts whose greedy continuations are anchored, by the register of the
 * text the model is measured on (as the accuracy suite picks its text). */
static const char *const STORY_PROMPTS[] = {"Once upon a time", "The little dog",
                                            "Lily and Tom went to the park", NULL};
static const char *const PROSE_PROMPTS[] = {"The history of measurement",
                                            "In the morning, the old train",
                                            "Water boils at a temperature of", NULL};

static void help(FILE *f)
{
    fprintf(f,
            "usage: gauntlet anchors MATRIX MODEL --peer llama-perplexity=PATH\n"
            "                        --peer llama-server=PATH [options]\n"
            "Measures MODEL's anchors with llama.cpp on the artifacts MATRIX runs it at\n"
            "(each of its quants, made by the same cache as qualify) and prints the\n"
            "anchors file (matrices/anchors/MODEL.json; matrices/README.md, \"Anchors\"):\n"
            "  ppl     llama-perplexity on suites/data/stories.txt (vocabulary <= 1024) or\n"
            "          eval.txt, -c N_CTX -b N_CTX --chunks CHUNKS\n"
            "  greedy  llama-server's greedy tokens (temperature 0) for 3 fixed prompts,\n"
            "          kept up to the first position where its top-2 log-probabilities are\n"
            "          closer than NEAR_TIE nats (a near-tie another correct backend may\n"
            "          break the other way)\n"
            "ci/peer-llamacpp.sh builds both tools and prints their paths.\n"
            "options:\n"
            "  --peer TOOL=PATH    llama-perplexity and llama-server (both required)\n"
            "  --quants LIST       only these quants (default: every quant of MODEL)\n"
            "  --n-ctx N           perplexity chunk size (default 128)\n"
            "  --chunks N          chunks scored (default 2)\n"
            "  --n-predict N       greedy tokens asked for (default 32, at most 128)\n"
            "  --near-tie X        nats (default 0.5)\n"
            "  --ppl-rel-tol X     relative tolerance written into the file (default 0.01)\n"
            "  --tolerance-note S  why that tolerance (written with it)\n"
            "  --cache-dir DIR     artifact cache (default as qualify)\n"
            "  --threads N         for llama.cpp (default 2)\n"
            "  --into FILE         write FILE instead of printing: the quants measured now\n"
            "                      replace FILE's, its other quants are kept (same text,\n"
            "                      n_ctx and chunks required)\n"
            "exit: 0 printed, 1 a tool failed, 2 usage\n");
}

typedef struct peer {
    const char *ppl, *server;
    int n_ctx, chunks, n_predict, threads;
    double near_tie;
} peer;

/* Whether the comma-separated list has item. */
static bool listed(const char *list, const char *item)
{
    size_t n = strlen(item);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k == n && !strncmp(p, item, n))
            return true;
        p = e ? e + 1 : NULL;
    }
    return false;
}

/* The peer's build stamp (ci/peer-llamacpp.sh writes BUILT beside bin/):
 * which llama.cpp measured, for the file's provenance. */
static void peer_stamp(const char *tool, char *out, size_t cap)
{
    char path[4200];
    snprintf(path, sizeof path, "%s", tool);
    char *slash = strrchr(path, '/');
    if (slash)
        *slash = '\0';
    slash = strrchr(path, '/');
    if (slash)
        *slash = '\0';
    strncat(path, "/BUILT", sizeof path - strlen(path) - 1);
    FILE *f = fopen(path, "r");
    snprintf(out, cap, "%s", "an unstamped llama.cpp build");
    if (f) {
        if (fgets(out, (int)cap, f))
            out[strcspn(out, "\n")] = '\0';
        fclose(f);
    }
}

/* Runs argv with stdout and stderr into out (a file); returns the exit code,
 * -1 when it could not start or died on a signal. */
static int run_to_file(char *const argv[], const char *out)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0)
            _exit(127);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) == (size_t)n)
        b[n] = '\0';
    else {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

static int measure_ppl(const peer *p, const char *model, const char *text, const char *scratch,
                       double *ppl, gt_err *err)
{
    char c[16], ch[16], th[16], log[4200];
    snprintf(c, sizeof c, "%d", p->n_ctx);
    snprintf(ch, sizeof ch, "%d", p->chunks);
    snprintf(th, sizeof th, "%d", p->threads);
    snprintf(log, sizeof log, "%s/perplexity.log", scratch);
    char *argv[] = {(char *)p->ppl, "-m", (char *)model, "-f", (char *)text, "-c", c, "-b", c,
                    "--chunks", ch, "-t", th, NULL};
    /* llama.cpp logs from a thread of its own, which an exit can cut short:
     * a run whose log lacks the estimate is run again (twice at most). */
    int rc = -1;
    char *out = NULL;
    const char *at = NULL;
    for (int attempt = 0; attempt < 3 && !at; attempt++) {
        free(out);
        rc = run_to_file(argv, log);
        out = slurp(log);
        at = out && rc == 0 ? strstr(out, "Final estimate: PPL = ") : NULL;
    }
    if (rc != 0 || !at || sscanf(at, "Final estimate: PPL = %lf", ppl) != 1) {
        gt_err_set(err, "llama-perplexity on %s exited %d without a final estimate (log %s)", model,
                   rc, log);
        free(out);
        return -1;
    }
    free(out);
    unlink(log);
    return 0;
}

/* One prompt's greedy tokens up to the first near-tie, as an anchor entry. */
static cJSON *greedy_one(const peer *p, const char *base, const char *prompt, gt_err *err)
{
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "prompt", prompt);
    cJSON_AddNumberToObject(req, "n_predict", p->n_predict);
    cJSON_AddNumberToObject(req, "temperature", 0);
    cJSON_AddNumberToObject(req, "n_probs", 2);
    cJSON_AddBoolToObject(req, "cache_prompt", false);
    char url[256];
    snprintf(url, sizeof url, "%s/completion", base);
    gt_http_reply r = {0};
    int rc = gt_http_post_json(url, req, 0, 120, &r, err);
    cJSON_Delete(req);
    cJSON *d = rc == 0 && r.status == 200 ? cJSON_Parse(r.body) : NULL;
    gt_http_reply_free(&r);
    const cJSON *probs = cJSON_GetObjectItemCaseSensitive(d, "completion_probabilities");
    if (!cJSON_IsArray(probs)) {
        if (rc == 0)
            gt_err_set(err, "llama-server's /completion answered without completion_probabilities");
        cJSON_Delete(d);
        return NULL;
    }
    cJSON *e = cJSON_CreateObject(), *toks = cJSON_CreateArray();
    char text[4096] = "", cut[256];
    snprintf(cut, sizeof cut, "all %d tokens asked for", cJSON_GetArraySize(probs));
    int i = 0;
    for (const cJSON *s = probs->child; s; s = s->next, i++) {
        const cJSON *top = cJSON_GetObjectItemCaseSensitive(s, "top_logprobs");
        const cJSON *t0 = cJSON_GetArrayItem(top, 0), *t1 = cJSON_GetArrayItem(top, 1);
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(s, "id");
        const cJSON *piece = cJSON_GetObjectItemCaseSensitive(s, "token");
        double l0 = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(t0, "logprob"));
        double l1 = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(t1, "logprob"));
        if (!cJSON_IsNumber(id) || !t0 || isnan(l0)) {
            snprintf(cut, sizeof cut, "llama-server gave no top log-probabilities at token %d", i);
            break;
        }
        if (t1 && !isnan(l1) && l0 - l1 < p->near_tie) {
            snprintf(cut, sizeof cut, "near-tie at token %d: top-2 log-probabilities %.3f apart",
                     i, l0 - l1);
            break;
        }
        cJSON_AddItemToArray(toks, cJSON_CreateNumber(id->valuedouble));
        if (cJSON_IsString(piece))
            strncat(text, piece->valuestring, sizeof text - strlen(text) - 1);
    }
    const cJSON *stop = cJSON_GetObjectItemCaseSensitive(d, "stop_type");
    if (i == cJSON_GetArraySize(probs) && cJSON_IsString(stop) && strcmp(stop->valuestring, "eos") == 0)
        snprintf(cut, sizeof cut, "end of text after %d tokens", i);
    cJSON_AddStringToObject(e, "prompt", prompt);
    cJSON_AddItemToObject(e, "tokens", toks);
    cJSON_AddStringToObject(e, "text", text);
    cJSON_AddStringToObject(e, "cut", cut);
    cJSON_Delete(d);
    return e;
}

/* Starts llama-server on model, anchors each prompt, stops it. */
static cJSON *measure_greedy(const peer *p, const char *model, const char *const *prompts,
                             const char *scratch, gt_err *err)
{
    int port = gt_server_proc_free_port(err);
    char ps[16], th[16], log[4200], base[64], health[96];
    snprintf(ps, sizeof ps, "%d", port);
    snprintf(th, sizeof th, "%d", p->threads);
    snprintf(log, sizeof log, "%s/server.log", scratch);
    snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
    snprintf(health, sizeof health, "%s/health", base);
    if (port < 0)
        return NULL;
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        char *argv[] = {(char *)p->server, "-m", (char *)model, "--host", "127.0.0.1", "--port",
                        ps, "-t", th, "-c", "1024", "-np", "1", NULL};
        execv(argv[0], argv);
        _exit(127);
    }
    if (pid < 0) {
        gt_err_set(err, "fork: %s", strerror(errno));
        return NULL;
    }
    cJSON *list = NULL;
    if (gt_http_wait_healthy(health, 120, err) == 0) {
        list = cJSON_CreateArray();
        for (int i = 0; prompts[i] && list; i++) {
            cJSON *e = greedy_one(p, base, prompts[i], err);
            if (!e) {
                cJSON_Delete(list);
                list = NULL;
            } else {
                cJSON_AddItemToArray(list, e);
            }
        }
    } else {
        gt_err_wrap(err, "llama-server (log %s)", log);
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    if (list)
        unlink(log);
    return list;
}

/* --into: the quants of the existing file that were not measured now. */
static int keep_old_quants(const char *path, cJSON *out, gt_err *err)
{
    char *text = slurp(path);
    if (!text)
        return 0; /* a new file */
    cJSON *old = cJSON_Parse(text);
    free(text);
    static const char *const SAME[] = {"model", "text", "n_ctx", "chunks", NULL};
    for (int i = 0; SAME[i]; i++)
        if (!cJSON_Compare(cJSON_GetObjectItemCaseSensitive(old, SAME[i]),
                           cJSON_GetObjectItemCaseSensitive(out, SAME[i]), true)) {
            cJSON_Delete(old);
            return gt_err_set(err, "%s: its \"%s\" differs from this measurement's; measure every "
                                   "quant again into a new file",
                              path, SAME[i]);
        }
    cJSON *qs = cJSON_GetObjectItemCaseSensitive(out, "quants");
    const cJSON *oq = cJSON_GetObjectItemCaseSensitive(old, "quants");
    for (const cJSON *e = oq ? oq->child : NULL; e; e = e->next)
        if (!cJSON_GetObjectItemCaseSensitive(qs, e->string))
            cJSON_AddItemToObject(qs, e->string, cJSON_Duplicate(e, 1));
    cJSON_Delete(old);
    return 0;
}

int cmd_anchors(int argc, char **argv)
{
    static const struct option opts[] = {
        {"peer", required_argument, NULL, 'p'},      {"quants", required_argument, NULL, 'q'},
        {"n-ctx", required_argument, NULL, 'c'},     {"chunks", required_argument, NULL, 'k'},
        {"n-predict", required_argument, NULL, 'n'}, {"near-tie", required_argument, NULL, 't'},
        {"ppl-rel-tol", required_argument, NULL, 'r'},
        {"tolerance-note", required_argument, NULL, 'N'},
        {"cache-dir", required_argument, NULL, 'C'}, {"threads", required_argument, NULL, 'T'},
        {"into", required_argument, NULL, 'I'},
        {"help", no_argument, NULL, 'h'},            {NULL, 0, NULL, 0}};
    peer p = {.n_ctx = 128, .chunks = 2, .n_predict = 32, .threads = 2, .near_tie = 0.5};
    const char *quants = NULL, *cache_dir = NULL, *note = NULL, *into = NULL;
    double rel_tol = 0.01;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            if (!strncmp(optarg, "llama-perplexity=", 17))
                p.ppl = optarg + 17;
            else if (!strncmp(optarg, "llama-server=", 13))
                p.server = optarg + 13;
            else {
                fprintf(stderr, "gauntlet anchors: --peer takes llama-perplexity=PATH or "
                                "llama-server=PATH, got %s\n", optarg);
                return GT_EXIT_USAGE;
            }
            break;
        case 'q': quants = optarg; break;
        case 'c': p.n_ctx = atoi(optarg); break;
        case 'k': p.chunks = atoi(optarg); break;
        case 'n': p.n_predict = atoi(optarg); break;
        case 't': p.near_tie = atof(optarg); break;
        case 'r': rel_tol = atof(optarg); break;
        case 'N': note = optarg; break;
        case 'C': cache_dir = optarg; break;
        case 'T': p.threads = atoi(optarg); break;
        case 'I': into = optarg; break;
        case 'h': help(stdout); return 0;
        default: help(stderr); return GT_EXIT_USAGE;
        }
    }
    if (optind != argc - 2 || !p.ppl || !p.server || p.n_ctx < 8 || p.chunks < 1 ||
        p.n_predict < 1 || p.n_predict > 128 || !(p.near_tie >= 0) || !(rel_tol > 0) ||
        p.threads < 1) {
        help(stderr);
        return GT_EXIT_USAGE;
    }
    gt_err err = {{0}};
    gt_matrix *m = NULL;
    gt_artifacts arts = {0};
    cJSON *out = NULL;
    int rc = 1;
    char scratch[] = "/tmp/gauntlet-anchors-XXXXXX";
    if (!mkdtemp(scratch)) {
        perror("gauntlet anchors: mkdtemp");
        return 1;
    }
    if (gt_matrix_load(argv[optind], &m, &err) != 0) {
        fprintf(stderr, "gauntlet anchors: %s\n", err.msg);
        rc = GT_EXIT_USAGE;
        goto done;
    }
    const gt_mx_model *md = NULL;
    for (int i = 0; i < m->n_models; i++)
        if (!strcmp(m->models[i].id, argv[optind + 1]))
            md = &m->models[i];
    if (!md) {
        fprintf(stderr, "gauntlet anchors: %s has no model %s\n", argv[optind], argv[optind + 1]);
        rc = GT_EXIT_USAGE;
        goto done;
    }
    if (gt_http_global_init(&err) != 0 || gt_artifacts_init(&arts, m, cache_dir, false, &err) != 0)
        goto fail;
    const gt_artifact *src = gt_artifacts_source(&arts, md);
    if (src->state != GT_ART_OK) {
        gt_err_set(&err, "%s: %s", md->id, src->reason);
        goto fail;
    }
    gt_model *gm;
    if (gt_model_load(src->path, &gm, &err) != 0)
        goto fail;
    bool stories = gt_model_hparams(gm)->n_vocab <= 1024;
    gt_model_free(gm);
    const char *text_name = stories ? "stories.txt" : "eval.txt";
    char text[4096];
    snprintf(text, sizeof text, "%s/suites/data/%s", GT_SOURCE_DIR, text_name);
    char *body = slurp(text), hash[65];
    if (!body) {
        gt_err_set(&err, "cannot read %s", text);
        goto fail;
    }
    gt_sha256_hex(body, strlen(body), hash);
    free(body);

    out = cJSON_CreateObject();
    char source[1024], stamp[512], day[32];
    time_t now = time(NULL);
    strftime(day, sizeof day, "%Y-%m-%d", gmtime(&now));
    peer_stamp(p.ppl, stamp, sizeof stamp);
    snprintf(source, sizeof source,
             "llama.cpp (%s), measured %s by `gauntlet anchors`: llama-perplexity -c %d -b %d "
             "--chunks %d; llama-server /completion temperature 0, n_probs 2, %d tokens, cut at "
             "the first top-2 gap < %.2f nats",
             stamp, day, p.n_ctx, p.n_ctx, p.chunks, p.n_predict, p.near_tie);
    cJSON_AddStringToObject(out, "model", md->id);
    cJSON_AddStringToObject(out, "source", source);
    cJSON_AddStringToObject(out, "text", text_name);
    cJSON_AddStringToObject(out, "text_sha256", hash);
    cJSON_AddNumberToObject(out, "n_ctx", p.n_ctx);
    cJSON_AddNumberToObject(out, "chunks", p.chunks);
    cJSON_AddNumberToObject(out, "ppl_rel_tol", rel_tol);
    if (note)
        cJSON_AddStringToObject(out, "tolerance_note", note);
    cJSON *qs = cJSON_AddObjectToObject(out, "quants");
    const cJSON *mq = md->quants ? md->quants->child : NULL;
    int nq = md->quants ? cJSON_GetArraySize(md->quants) : m->n_quants;
    for (int i = 0; i < nq; i++, mq = mq ? mq->next : NULL) {
        const char *q = md->quants ? mq->valuestring : m->quants[i];
        if (quants && !listed(quants, q))
            continue;
        const gt_artifact *art = gt_artifacts_quant(&arts, md, q);
        if (art->state != GT_ART_OK) {
            gt_err_set(&err, "%s %s: %s", md->id, q, art->reason);
            goto fail;
        }
        fprintf(stderr, "gauntlet anchors: %s %s: %s\n", md->id, q, art->path);
        double ppl;
        if (measure_ppl(&p, art->path, text, scratch, &ppl, &err) != 0)
            goto fail;
        cJSON *g = measure_greedy(&p, art->path, stories ? STORY_PROMPTS : PROSE_PROMPTS, scratch,
                                  &err);
        if (!g)
            goto fail;
        cJSON *e = cJSON_AddObjectToObject(qs, q);
        cJSON_AddStringToObject(e, "artifact_sha256", art->sha256);
        cJSON_AddNumberToObject(e, "ppl", ppl);
        cJSON_AddItemToObject(e, "greedy", g);
        fprintf(stderr, "gauntlet anchors: %s %s: ppl %.4f\n", md->id, q, ppl);
    }
    if (into && keep_old_quants(into, out, &err) != 0)
        goto fail;
    char *s = cJSON_Print(out);
    if (into) {
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.tmp", into);
        FILE *f = fopen(tmp, "w");
        bool ok = f && fprintf(f, "%s\n", s) > 0;
        ok = f && fclose(f) == 0 && ok && rename(tmp, into) == 0;
        if (!ok) {
            free(s);
            gt_err_set(&err, "cannot write %s", into);
            goto fail;
        }
        fprintf(stderr, "gauntlet anchors: wrote %s\n", into);
    } else {
        printf("%s\n", s);
    }
    free(s);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "gauntlet anchors: %s\n", err.msg);
done:
    cJSON_Delete(out);
    if (m)
        gt_artifacts_free(&arts);
    gt_matrix_free(m);
    rmdir(scratch);
    return rc;
}
