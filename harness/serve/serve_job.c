/* serve_job.c: a job's life, shared by the HTTP side (which makes and
 * waits on it) and the worker (which answers it): its release, and the
 * sink its stream is written through. See serve_server.h. */
#include <stdlib.h>
#include <string.h>

#include "serve_server.h"

void gt_serve_job_release_locked(job *j)
{
    if (--j->refs > 0)
        return;
    gt_serve_req_free(&j->req);
    free(j->ids);
    free(j->body);
    free(j->out);
    pthread_cond_destroy(&j->cv);
    free(j);
}

void gt_serve_job_write(void *ud, const char *data, size_t n)
{
    job *j = ud;
    pthread_mutex_lock(&j->srv->mu);
    if (j->out_sent == j->out_len)
        j->out_sent = j->out_len = 0; /* all sent: reuse the buffer from the start */
    if (j->out_len + n > j->out_cap) {
        size_t cap = j->out_cap ? j->out_cap : 4096;
        while (cap < j->out_len + n)
            cap *= 2;
        char *p = realloc(j->out, cap);
        if (!p) {
            pthread_mutex_unlock(&j->srv->mu);
            return;
        }
        j->out = p;
        j->out_cap = cap;
    }
    memcpy(j->out + j->out_len, data, n);
    j->out_len += n;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->srv->mu);
}

bool gt_serve_job_cancelled(void *ud)
{
    job *j = ud;
    pthread_mutex_lock(&j->srv->mu);
    bool c = j->cancelled;
    pthread_mutex_unlock(&j->srv->mu);
    return c;
}
