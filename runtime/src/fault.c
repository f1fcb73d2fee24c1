/* fault.c: GT_FAULT node faults (session.h), which corrupt exactly one
 * node of one layer on one backend, so that tests can prove the localizer
 * names the node a real porting bug would sit in. The entries are parsed
 * once; the harness's own "kind:cell-glob" GT_FAULT entries are ignored
 * here (they have no '@'). */
#include "fault.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/quant.h"

#define MAX_FAULTS 8

typedef struct node_fault {
    const char *kind;
    char node[64]; /* the node it corrupts: "blk.2.q_rope" */
} node_fault;

static const struct {
    const char *kind, *target;
} KINDS[] = {
    {"rope-mode", "q_rope"},
    {"matmul-short", "ffn_out"},
    {"attn-overread", "kqv"},
    {"norm-eps", "attn_norm_rms"},
};

static node_fault g_faults[MAX_FAULTS];
static int g_n_faults;
static char g_backend[32];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void parse_env(void)
{
    const char *env = getenv("GT_FAULT"), *be = getenv("GT_FAULT_BACKEND");
    if (!env || !be || !be[0])
        return;
    snprintf(g_backend, sizeof g_backend, "%s", be);
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", env);
    char *save = NULL;
    for (char *e = strtok_r(buf, ",", &save); e && g_n_faults < MAX_FAULTS;
         e = strtok_r(NULL, ",", &save)) {
        char *at = strchr(e, '@');
        if (!at || strchr(e, ':'))
            continue;
        *at = '\0';
        char *end;
        long layer = strtol(at + 1, &end, 10);
        if (end == at + 1 || *end || layer < 0)
            continue;
        for (size_t k = 0; k < sizeof KINDS / sizeof KINDS[0]; k++)
            if (strcmp(e, KINDS[k].kind) == 0) {
                node_fault *f = &g_faults[g_n_faults++];
                f->kind = KINDS[k].kind;
                snprintf(f->node, sizeof f->node, "blk.%ld.%s", layer, KINDS[k].target);
            }
    }
}

const char *gt_node_fault(const char *backend, const char *node)
{
    pthread_once(&g_once, parse_env);
    if (!g_n_faults || !backend || strcmp(backend, g_backend) != 0)
        return NULL;
    for (int i = 0; i < g_n_faults; i++)
        if (strcmp(g_faults[i].node, node) == 0)
            return g_faults[i].kind;
    return NULL;
}

bool gt_fault_any(const char *backend)
{
    pthread_once(&g_once, parse_env);
    return g_n_faults > 0 && backend && strcmp(backend, g_backend) == 0;
}

void gt_fault_before(const char *kind, gt_tensor *t)
{
    if (strcmp(kind, "rope-mode") == 0)
        t->iparams[4] ^= 1;
    else if (strcmp(kind, "attn-overread") == 0)
        t->iparams[3] += 1; /* row i now believes it sits one position later */
    else if (strcmp(kind, "norm-eps") == 0)
        t->fparams[0] = 1.0f;
}

/* matmul-short, applied to the computed node: t[i,j] loses the terms of
 * the last d columns of K, as a kernel whose loop stops one block early. */
int gt_fault_after(const char *kind, gt_tensor *t, gt_err *err)
{
    if (strcmp(kind, "matmul-short") != 0 || t->op != GT_OP_MUL_MAT)
        return 0;
    const gt_tensor *a = t->src[0], *b = t->src[1];
    const gt_type_traits *ti = gt_type_info(a->type);
    const int64_t K = a->ne[0], N = a->ne[1], M = b->ne[1];
    int64_t d = ti->block_size;
    while (d < 32 && d * 2 <= K)
        d *= 2;
    const size_t row = gt_tensor_row_bytes(a), tail = gt_row_size(a->type, d);
    float *tv = malloc(sizeof(float) * (size_t)(N * M)), *bv = malloc(sizeof(float) * (size_t)(K * M));
    char *av = malloc(row * (size_t)N);
    float *w = malloc(sizeof(float) * (size_t)d);
    int rc = -1;
    if (!tv || !bv || !av || !w) {
        gt_err_set(err, "out of memory applying fault %s", kind);
        goto done;
    }
    const gt_backend_iface *bi = t->buf->backend->iface;
    if (bi->download(t->buf, t->offset, tv, sizeof(float) * (size_t)(N * M), err) != 0 ||
        bi->download(b->buf, b->offset, bv, sizeof(float) * (size_t)(K * M), err) != 0 ||
        a->buf->backend->iface->download(a->buf, a->offset, av, row * (size_t)N, err) != 0)
        goto done;
    for (int64_t j = 0; j < N; j++) {
        gt_dequantize_row(a->type, av + (size_t)j * row + row - tail, w, d);
        for (int64_t i = 0; i < M; i++) {
            const float *x = bv + i * K + K - d;
            double s = 0;
            for (int64_t k = 0; k < d; k++)
                s += (double)w[k] * x[k];
            tv[i * N + j] -= (float)s;
        }
    }
    rc = bi->upload(t->buf, t->offset, tv, sizeof(float) * (size_t)(N * M), err);
done:
    free(tv);
    free(bv);
    free(av);
    free(w);
    return rc;
}
