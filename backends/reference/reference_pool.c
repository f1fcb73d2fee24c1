/* reference_pool.c: the reference backend's thread pool (see reference.h).
 *
 * Deliberately plain: one mutex, one "new job" condition variable for the
 * workers and one "done" condition variable for the caller. Each job is a
 * range of items that threads claim a chunk at a time from an atomic
 * counter, so a thread that was descheduled (the machine is shared) costs
 * only its current chunk. The caller does its share too. A job wakes the
 * workers once; a graph has a few hundred nodes, and the reference only
 * hands the big ones (matrix products, attention, long element-wise rows)
 * to the pool, so the cost of a wake-up (microseconds) does not matter. */
#include "reference.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

struct ref_pool {
    int n;               /* threads, the caller included */
    pthread_t *workers;  /* (n - 1) */
    int started;         /* workers actually running */

    pthread_mutex_t mu;
    pthread_cond_t wake; /* workers wait here for a new generation or quit */
    pthread_cond_t done; /* the caller waits here for running == 0 */
    unsigned gen;        /* bumped for every job */
    int running;         /* workers not yet finished with the current job */
    bool quit;

    /* the current job (written under mu before gen is bumped) */
    ref_task_fn fn;
    void *arg;
    int64_t n_items, chunk;
    atomic_llong next;   /* first item not yet claimed */
};

typedef struct worker_arg {
    ref_pool *p;
    int thread;
} worker_arg;

/* Claims chunks until none is left. */
static void do_share(ref_pool *p, int thread)
{
    for (;;) {
        const int64_t begin = atomic_fetch_add(&p->next, p->chunk);
        if (begin >= p->n_items)
            return;
        const int64_t end = begin + p->chunk < p->n_items ? begin + p->chunk : p->n_items;
        p->fn(p->arg, begin, end, thread);
    }
}

static void *worker_main(void *v)
{
    worker_arg wa = *(worker_arg *)v;
    free(v);
    ref_pool *p = wa.p;
    unsigned seen = 0; /* the generation at creation: no job has run yet */
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->gen == seen && !p->quit)
            pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit)
            break;
        seen = p->gen;
        pthread_mutex_unlock(&p->mu);
        do_share(p, wa.thread);
        pthread_mutex_lock(&p->mu);
        if (--p->running == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int ref_pool_new(int n_threads, ref_pool **out, gt_err *err)
{
    *out = NULL;
    ref_pool *p = calloc(1, sizeof *p);
    if (!p)
        return gt_err_set(err, "reference: out of memory");
    p->n = n_threads < 1 ? 1 : n_threads;
    atomic_init(&p->next, 0);
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        free(p);
        return gt_err_set(err, "reference: cannot create the pool's lock");
    }
    if (pthread_cond_init(&p->wake, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        free(p);
        return gt_err_set(err, "reference: cannot create the pool's condition");
    }
    if (pthread_cond_init(&p->done, NULL) != 0) {
        pthread_cond_destroy(&p->wake);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return gt_err_set(err, "reference: cannot create the pool's condition");
    }
    if (p->n > 1 && !(p->workers = calloc((size_t)p->n - 1, sizeof *p->workers))) {
        ref_pool_free(p);
        return gt_err_set(err, "reference: out of memory");
    }
    for (int i = 1; i < p->n; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (wa) {
            wa->p = p;
            wa->thread = i;
        }
        if (!wa || pthread_create(&p->workers[i - 1], NULL, worker_main, wa) != 0) {
            free(wa);
            ref_pool_free(p);
            return gt_err_set(err, "reference: cannot create worker thread %d of %d", i,
                              n_threads);
        }
        p->started++;
    }
    *out = p;
    return 0;
}

void ref_pool_free(ref_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = true;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->started; i++)
        pthread_join(p->workers[i], NULL);
    free(p->workers);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int ref_pool_threads(const ref_pool *p) { return p->n; }

void ref_pool_for(ref_pool *p, int64_t n, int64_t chunk, ref_task_fn fn, void *arg)
{
    if (n <= 0)
        return;
    if (chunk < 1)
        chunk = 1;
    if (p->started == 0 || n <= chunk) {
        fn(arg, 0, n, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->n_items = n;
    p->chunk = chunk;
    atomic_store(&p->next, 0);
    p->running = p->started;
    p->gen++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);

    do_share(p, 0);

    pthread_mutex_lock(&p->mu);
    while (p->running > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
