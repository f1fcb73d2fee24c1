/* worker_lines.c: see worker_lines.h. */
#include "worker_lines.h"

#include <stdlib.h>
#include <string.h>

void gt_wlines_feed(gt_wlines *w, const char *data, size_t n, gt_wlines_fn fn, void *user)
{
    for (size_t i = 0; i < n; i++) {
        if (w->len + 2 > w->cap) {
            size_t nc = w->cap ? w->cap * 2 : 4096;
            char *nb = realloc(w->buf, nc);
            if (!nb)
                continue; /* drop the byte; the line will fail to parse and say so */
            w->buf = nb;
            w->cap = nc;
        }
        if (data[i] == '\n') {
            w->buf[w->len] = '\0';
            w->len = 0;
            fn(user, w->buf);
        } else {
            w->buf[w->len++] = data[i];
        }
    }
}

void gt_wlines_end(gt_wlines *w, gt_wlines_fn fn, void *user)
{
    if (!w->len)
        return;
    w->buf[w->len] = '\0';
    w->len = 0;
    fn(user, w->buf);
}

void gt_wlines_free(gt_wlines *w)
{
    free(w->buf);
    memset(w, 0, sizeof *w);
}

int gt_wlines_take(gt_outcome *o, const char *text)
{
    cJSON *l = cJSON_Parse(text);
    if (!cJSON_IsObject(l)) {
        cJSON_Delete(l);
        o->bad_lines++;
        return -1;
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(l, "t");
    if (cJSON_IsString(t) && strcmp(t->valuestring, "done") == 0) {
        const cJSON *ws = cJSON_GetObjectItemCaseSensitive(l, "worker_s");
        if (cJSON_IsNumber(ws))
            o->worker_s = ws->valuedouble;
    }
    cJSON_AddItemToArray(o->lines, l);
    return cJSON_GetArraySize(o->lines);
}
