/* fault.c: parsing GT_FAULT's runtime entries (gt/fault.h) once, and
 * answering which faults apply on a backend. The harness's own entries
 * ("kind[=arg]:cell-glob" with a kind the runtime does not have) are left
 * to it; an entry that is neither is an error, reported by every session
 * (gt_fault_session_check), so a typo can never run a clean build that the
 * caller believes faulted. Applying them: fault_apply.c. */
#include "fault.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NODE_FAULTS 8

typedef struct node_fault {
    const char *kind;
    char node[64]; /* the node it corrupts: "blk.2.q_rope" */
} node_fault;

static const struct {
    const char *kind, *target;
} NODE_KINDS[] = {
    {"rope-mode", "q_rope"},
    {"matmul-short", "ffn_out"},
    {"attn-overread", "kqv"},
    {"norm-eps", "attn_norm_rms"},
};

/* The runtime's other kinds, and how each writes its argument. */
static const struct {
    const char *kind, *form;
} KINDS[] = {
    {"logit-scale", "=X"},   {"logit-scale-quant", "=X"}, {"logit-noise", "=X"},
    {"token-swap", "=A:B"},  {"const-token", "=T"},       {"nan-at", "=I"},
    {"graph-drop-last", ""}, {"kv-decode-drop", "@N"},    {"attn-window", "=N"},
    {"batch-split", "@L"},   {"seq-bleed", "@L"},         {"thread-race", ""},
    {"pos-wrap", "@N"},
};

static struct {
    node_fault nodes[MAX_NODE_FAULTS];
    int n_nodes;
    gt_fault_set set;
    bool any_set;        /* an output or graph fault is set */
    char backend[32];    /* GT_FAULT_BACKEND, "" = every backend */
    char active[512];    /* the runtime entries, normalized */
    char error[512];     /* the first bad entry, "" = none */
} g;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_announced;

static void fail(const char *entry, const char *why)
{
    if (!g.error[0])
        snprintf(g.error, sizeof g.error, "GT_FAULT entry '%s': %s", entry, why);
}

/* The entry's kind: its text up to the first '=', '@' or ':'. */
static size_t kind_len(const char *e) { return strcspn(e, "=@:"); }

static bool parse_num(const char *s, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return end != s && !*end && errno == 0 && isfinite(*out);
}

static bool parse_int(const char *s, const char *stop, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || (stop ? *end != *stop : *end != '\0') || errno || v < 0 || v > 1 << 30)
        return false;
    *out = (int)v;
    return true;
}

static void add_active(const char *entry)
{
    size_t n = strlen(g.active);
    snprintf(g.active + n, sizeof g.active - n, "%s%s", n ? "," : "", entry);
}

/* One output or graph entry; kind k of KINDS, arg after its '=' or '@'. */
static void parse_kind(const char *entry, const char *kind, const char *arg)
{
    gt_fault_set *f = &g.set;
    const char *sep = entry + strlen(kind);
    const char want = strcmp(kind, "kv-decode-drop") == 0 || strcmp(kind, "batch-split") == 0 ||
                              strcmp(kind, "seq-bleed") == 0 || strcmp(kind, "pos-wrap") == 0
                          ? '@'
                          : '=';
    const bool bare = strcmp(kind, "graph-drop-last") == 0 || strcmp(kind, "thread-race") == 0;
    if (bare ? *sep != '\0' : *sep != want) {
        char why[96];
        snprintf(why, sizeof why, bare ? "takes no argument" : "is written %s%c...", kind, want);
        fail(entry, why);
        return;
    }
    bool ok = true;
    if (strcmp(kind, "logit-scale") == 0)
        ok = f->scale = parse_num(arg, &f->scale_x);
    else if (strcmp(kind, "logit-scale-quant") == 0)
        ok = f->quant = parse_num(arg, &f->quant_x);
    else if (strcmp(kind, "logit-noise") == 0)
        ok = f->noise = parse_num(arg, &f->noise_x) && f->noise_x > 0;
    else if (strcmp(kind, "token-swap") == 0)
        ok = parse_int(arg, ":", &f->swap_a) && parse_int(strchr(arg, ':') + 1, NULL, &f->swap_b) &&
             f->swap_a != f->swap_b;
    else if (strcmp(kind, "const-token") == 0)
        ok = parse_int(arg, NULL, &f->const_token);
    else if (strcmp(kind, "nan-at") == 0)
        ok = parse_int(arg, NULL, &f->nan_at);
    else if (strcmp(kind, "graph-drop-last") == 0)
        f->drop_last = true;
    else if (strcmp(kind, "thread-race") == 0)
        f->thread_race = true;
    else if (strcmp(kind, "batch-split") == 0)
        ok = parse_int(arg, NULL, &f->batch_split_at);
    else if (strcmp(kind, "seq-bleed") == 0)
        ok = parse_int(arg, NULL, &f->seq_bleed_at);
    else if (strcmp(kind, "kv-decode-drop") == 0)
        ok = parse_int(arg, NULL, &f->kv_drop_at);
    else if (strcmp(kind, "attn-window") == 0)
        ok = parse_int(arg, NULL, &f->attn_window) && f->attn_window > 0;
    else if (strcmp(kind, "pos-wrap") == 0)
        ok = parse_int(arg, NULL, &f->pos_wrap) && f->pos_wrap > 0;
    if (!ok) {
        fail(entry, strcmp(kind, "token-swap") == 0
                        ? "wants two different token ids A:B (a runtime fault takes no cell "
                          "glob; GT_FAULT_BACKEND picks the backend)"
                        : "argument is not a number in range (a runtime fault takes no cell "
                          "glob; GT_FAULT_BACKEND picks the backend)");
        return;
    }
    g.any_set = true;
    add_active(entry);
}

static void parse_node(const char *entry, size_t kl, int k)
{
    int layer;
    if (entry[kl] != '@' || !parse_int(entry + kl + 1, NULL, &layer)) {
        fail(entry, "a node fault is written KIND@LAYER");
        return;
    }
    if (g.n_nodes == MAX_NODE_FAULTS) {
        fail(entry, "more than 8 node faults");
        return;
    }
    node_fault *f = &g.nodes[g.n_nodes++];
    f->kind = NODE_KINDS[k].kind;
    snprintf(f->node, sizeof f->node, "blk.%d.%s", layer, NODE_KINDS[k].target);
    add_active(entry);
}

static void parse_env(void)
{
    g.set = (gt_fault_set){.swap_a = -1, .swap_b = -1, .const_token = -1, .nan_at = -1,
                           .kv_drop_at = -1, .batch_split_at = -1, .seq_bleed_at = -1};
    const char *env = getenv("GT_FAULT"), *be = getenv("GT_FAULT_BACKEND");
    if (be)
        snprintf(g.backend, sizeof g.backend, "%s", be);
    if (!env)
        return;
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", env);
    char *save = NULL;
    for (char *e = strtok_r(buf, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
        const size_t kl = kind_len(e);
        bool known = false;
        for (size_t k = 0; k < sizeof NODE_KINDS / sizeof *NODE_KINDS && !known; k++)
            if (strlen(NODE_KINDS[k].kind) == kl && strncmp(e, NODE_KINDS[k].kind, kl) == 0) {
                parse_node(e, kl, (int)k);
                known = true;
            }
        for (size_t k = 0; k < sizeof KINDS / sizeof *KINDS && !known; k++)
            if (strlen(KINDS[k].kind) == kl && strncmp(e, KINDS[k].kind, kl) == 0) {
                parse_kind(e, KINDS[k].kind, e + kl + (e[kl] ? 1 : 0));
                known = true;
            }
        if (!known && !strchr(e, ':')) {
            char why[400] = "no such runtime fault (the runtime's:";
            for (size_t k = 0; k < sizeof KINDS / sizeof *KINDS; k++)
                snprintf(why + strlen(why), sizeof why - strlen(why), " %s%s", KINDS[k].kind,
                         KINDS[k].form);
            snprintf(why + strlen(why), sizeof why - strlen(why),
                     ", KIND@LAYER node faults; the harness's kinds take ':cell-glob')");
            fail(e, why);
        }
    }
}

static void once(void) { pthread_once(&g_once, parse_env); }

bool gt_fault_is_runtime(const char *entry)
{
    const size_t kl = kind_len(entry);
    for (size_t k = 0; k < sizeof KINDS / sizeof *KINDS; k++)
        if (strlen(KINDS[k].kind) == kl && strncmp(entry, KINDS[k].kind, kl) == 0)
            return true;
    for (size_t k = 0; k < sizeof NODE_KINDS / sizeof *NODE_KINDS; k++)
        if (strlen(NODE_KINDS[k].kind) == kl && strncmp(entry, NODE_KINDS[k].kind, kl) == 0)
            return true;
    return false;
}

int gt_fault_check(gt_err *err)
{
    once();
    return g.error[0] ? gt_err_set(err, "%s", g.error) : 0;
}

/* Output and graph faults: every backend, or the one GT_FAULT_BACKEND names. */
static bool set_applies(const char *backend)
{
    return g.any_set && backend && (!g.backend[0] || strcmp(backend, g.backend) == 0);
}

/* Node faults: only on the backend GT_FAULT_BACKEND names. */
static bool nodes_apply(const char *backend)
{
    return g.n_nodes > 0 && backend && g.backend[0] && strcmp(backend, g.backend) == 0;
}

const gt_fault_set *gt_fault_get(const char *backend)
{
    once();
    return set_applies(backend) ? &g.set : NULL;
}

const char *gt_fault_active(const char *backend)
{
    once();
    return set_applies(backend) || nodes_apply(backend) ? g.active : "";
}

const char *gt_node_fault(const char *backend, const char *node)
{
    once();
    if (!nodes_apply(backend))
        return NULL;
    for (int i = 0; i < g.n_nodes; i++)
        if (strcmp(g.nodes[i].node, node) == 0)
            return g.nodes[i].kind;
    return NULL;
}

bool gt_fault_any(const char *backend)
{
    once();
    return nodes_apply(backend) || (set_applies(backend) && g.set.quant);
}

int gt_fault_session_check(const char *backend, int n_vocab, gt_err *err)
{
    if (gt_fault_check(err) != 0)
        return -1;
    const gt_fault_set *f = gt_fault_get(backend);
    const int ids[3] = {f ? f->swap_a : -1, f ? f->swap_b : -1, f ? f->const_token : -1};
    for (int i = 0; i < 3; i++)
        if (ids[i] >= n_vocab)
            return gt_err_set(err, "GT_FAULT: token %d is outside the vocabulary (0..%d)", ids[i],
                              n_vocab - 1);
    if (g.active[0] && !__atomic_exchange_n(&g_announced, 1, __ATOMIC_SEQ_CST)) {
        if (g.n_nodes && !g.backend[0])
            fprintf(stderr, "gauntlet: GT_FAULT active: %s (node faults apply to no backend: "
                            "GT_FAULT_BACKEND is unset)\n", g.active);
        else
            fprintf(stderr, "gauntlet: GT_FAULT active on %s: %s\n",
                    g.backend[0] ? g.backend : "every backend", g.active);
        fflush(stderr);
    }
    return 0;
}
