/* report_arena.c: the arena that holds every string of a loaded run, so
 * that writers hold const char * and free nothing; freed with the run. */
#include "report.h"

#include <stdlib.h>
#include <string.h>

typedef struct gt_rep_arena {
    struct gt_rep_arena *next;
    size_t used, cap;
    char data[];
} arena_blk;

static char *arena_alloc(gt_rep_run *r, size_t n)
{
    arena_blk *a = r->arena;
    n = (n + 7) & ~(size_t)7;
    if (!a || a->used + n > a->cap) {
        size_t cap = n > 65536 ? n : 65536;
        arena_blk *b = malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->next = a;
        b->used = 0;
        b->cap = cap;
        r->arena = a = b;
    }
    char *p = a->data + a->used;
    a->used += n;
    return p;
}

/* A NULL column becomes "" so writers need no NULL checks; "oom" is set on
 * allocation failure and checked once per scan. */
const char *gt_report_dup_col(gt_rep_run *r, sqlite3_stmt *st, int i, bool *oom)
{
    const unsigned char *s = sqlite3_column_text(st, i);
    if (!s)
        return "";
    size_t n = (size_t)sqlite3_column_bytes(st, i);
    char *p = arena_alloc(r, n + 1);
    if (!p) {
        *oom = true;
        return "";
    }
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

const char *gt_report_strdup(gt_rep_run *r, const char *s, bool *oom)
{
    size_t n = strlen(s);
    char *p = arena_alloc(r, n + 1);
    if (!p) {
        *oom = true;
        return "";
    }
    memcpy(p, s, n + 1);
    return p;
}

void gt_report_arena_free(gt_rep_run *r)
{
    for (arena_blk *a = r->arena; a;) {
        arena_blk *next = a->next;
        free(a);
        a = next;
    }
    r->arena = NULL;
}
