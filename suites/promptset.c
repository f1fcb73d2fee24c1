/* promptset.c: see promptset.h. */
#include "promptset.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base.h"

static int slurp(const char *path, char **out, size_t *len, gt_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return gt_err_set(err, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0, r;
    char *buf = malloc(cap);
    while (buf && (r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (n + 1 == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
            }
            buf = nb;
        }
    }
    fclose(f);
    if (!buf)
        return gt_err_set(err, "out of memory reading %s", path);
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

/* dir is "prompts" or "data": both live beside each other under suites/. */
static void resolve(const gt_suite_ctx *c, const char *dir, const char *name, char *out,
                    size_t cap)
{
    const char *base = c->data_dir ? c->data_dir : "suites/data";
    if (name[0] == '/')
        snprintf(out, cap, "%s", name);
    else if (strcmp(dir, "data") == 0)
        snprintf(out, cap, "%s/%s", base, name);
    else
        snprintf(out, cap, "%s/../%s/%s", base, dir, name);
}

int gt_promptset_load(const gt_suite_ctx *c, int n_vocab, int max, gt_promptset *out,
                      gt_err *err)
{
    memset(out, 0, sizeof *out);
    const char *name = gt_suite_str(c, "prompts", n_vocab <= 1024 ? "stories.jsonl"
                                                                  : "basic.jsonl");
    resolve(c, "prompts", name, out->path, sizeof out->path);
    char *text;
    size_t len;
    if (slurp(out->path, &text, &len, err) != 0)
        return -1;
    gt_sha256 h;
    gt_sha256_init(&h);
    gt_sha256_update(&h, text, len);
    gt_sha256_final_hex(&h, out->sha256);
    int cap = 0, lineno = 0, rc = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        lineno++;
        if (strspn(line, " \t\r") == strlen(line))
            continue;
        if (max > 0 && out->n >= max)
            break;
        cJSON *o = cJSON_Parse(line);
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(o, "kind");
        const cJSON *pr = cJSON_GetObjectItemCaseSensitive(o, "prompt");
        if (!cJSON_IsObject(o) || !cJSON_IsString(id) || !cJSON_IsString(pr) ||
            (kind && !cJSON_IsString(kind))) {
            cJSON_Delete(o);
            rc = gt_err_set(err, "%s:%d: expected {\"id\": \"...\", \"prompt\": \"...\"}",
                            out->path, lineno);
            break;
        }
        if (out->n == cap) {
            gt_prompt *np = realloc(out->p, (size_t)(cap = cap ? cap * 2 : 32) * sizeof *np);
            if (!np) {
                cJSON_Delete(o);
                rc = gt_err_set(err, "out of memory");
                break;
            }
            out->p = np;
        }
        gt_prompt *p = &out->p[out->n];
        snprintf(p->id, sizeof p->id, "%s", id->valuestring);
        snprintf(p->kind, sizeof p->kind, "%s", kind ? kind->valuestring : "");
        p->text = strdup(pr->valuestring);
        cJSON_Delete(o);
        if (!p->text) {
            rc = gt_err_set(err, "out of memory");
            break;
        }
        out->n++;
    }
    free(text);
    if (rc == 0 && out->n == 0)
        rc = gt_err_set(err, "%s holds no prompts", out->path);
    if (rc != 0)
        gt_promptset_free(out);
    return rc;
}

void gt_promptset_free(gt_promptset *ps)
{
    for (int i = 0; i < ps->n; i++)
        free(ps->p[i].text);
    free(ps->p);
    ps->p = NULL;
    ps->n = 0;
}

int gt_evaltext_load(const gt_suite_ctx *c, int n_vocab, char **text, size_t *len,
                     char sha256[65], char *path, size_t path_cap, gt_err *err)
{
    const char *name = gt_suite_str(c, "text", n_vocab <= 1024 ? "stories.txt" : "eval.txt");
    resolve(c, "data", name, path, path_cap);
    if (slurp(path, text, len, err) != 0)
        return -1;
    gt_sha256 h;
    gt_sha256_init(&h);
    gt_sha256_update(&h, *text, *len);
    gt_sha256_final_hex(&h, sha256);
    return 0;
}
