/* cpu_threads.c: the CPU backend's thread pool.
 *
 * A decode step is ~300 small nodes, so what matters is the cost of one
 * synchronisation, not of starting work. The pool therefore wakes its
 * workers once per graph (gt_cpu_pool_run) and the graph driver separates
 * nodes with gt_cpu_barrier(); the caller is thread 0 and does its share.
 *
 * Both the "new job" signal and the barrier are a generation counter that
 * waiters watch. A waiter spins (with a pause hint) for a bounded number of
 * iterations, which covers the microseconds between nodes and the short gap
 * between two decode steps, and then sleeps on a condition variable so an
 * idle backend costs no CPU. The waker only takes the mutex when someone is
 * asleep: it publishes the new generation and then reads the sleeper count,
 * the sleeper publishes itself and then re-reads the generation (both
 * sequentially consistent), so at least one of them sees the other and no
 * wake-up is lost. */
#include "cpu.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

/* Pure spinning for a few microseconds (the usual gap between two nodes),
 * then yielding for up to about half a millisecond, then sleeping. The
 * yield phase matters on a shared machine: when another process holds the
 * other core, the thread we wait for may be queued behind us on ours, and
 * spinning would burn our whole time slice before it could run. */
#define SPIN_ITERS 256
#define YIELD_ITERS 512

typedef struct gt_cpu_signal {
    atomic_uint gen;
    atomic_int sleepers;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} gt_cpu_signal;

struct gt_cpu_pool {
    int n;
    pthread_t *threads;     /* (n - 1) workers; thread 0 is the caller */
    int started;            /* workers successfully created */

    gt_cpu_signal job;      /* generation bumped for each run (or to quit) */
    gt_cpu_task_fn fn;
    void *arg;
    atomic_bool quit;

    gt_cpu_signal bar;      /* barrier generation */
    atomic_int bar_count;
};

static int signal_init(gt_cpu_signal *s)
{
    atomic_init(&s->gen, 0);
    atomic_init(&s->sleepers, 0);
    if (pthread_mutex_init(&s->mu, NULL) != 0)
        return -1;
    if (pthread_cond_init(&s->cv, NULL) != 0) {
        pthread_mutex_destroy(&s->mu);
        return -1;
    }
    return 0;
}

static void signal_destroy(gt_cpu_signal *s)
{
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
}

/* Waits until s->gen differs from old. */
static void signal_wait(gt_cpu_signal *s, unsigned old)
{
    for (int i = 0; i < SPIN_ITERS; i++) {
        if (atomic_load_explicit(&s->gen, memory_order_acquire) != old)
            return;
        CPU_RELAX();
    }
    for (int i = 0; i < YIELD_ITERS; i++) {
        if (atomic_load_explicit(&s->gen, memory_order_acquire) != old)
            return;
        sched_yield();
    }
    pthread_mutex_lock(&s->mu);
    atomic_fetch_add(&s->sleepers, 1);
    while (atomic_load(&s->gen) == old)
        pthread_cond_wait(&s->cv, &s->mu);
    atomic_fetch_sub(&s->sleepers, 1);
    pthread_mutex_unlock(&s->mu);
}

static void signal_bump(gt_cpu_signal *s)
{
    atomic_fetch_add(&s->gen, 1);
    if (atomic_load(&s->sleepers) > 0) {
        pthread_mutex_lock(&s->mu);
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
    }
}

void gt_cpu_barrier(gt_cpu_pool *p)
{
    if (p->n <= 1)
        return;
    /* Read the generation before arriving: it cannot move until we do. */
    const unsigned gen = atomic_load_explicit(&p->bar.gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&p->bar_count, 1, memory_order_acq_rel) == p->n - 1) {
        atomic_store_explicit(&p->bar_count, 0, memory_order_relaxed);
        signal_bump(&p->bar); /* seq_cst: also publishes the reset count */
    } else {
        signal_wait(&p->bar, gen);
    }
}

typedef struct worker_arg {
    gt_cpu_pool *p;
    int ith;
} worker_arg;

static void *worker_main(void *v)
{
    worker_arg *wa = v;
    gt_cpu_pool *p = wa->p;
    const int ith = wa->ith;
    free(wa);
    unsigned seen = 0;
    for (;;) {
        signal_wait(&p->job, seen);
        seen = atomic_load_explicit(&p->job.gen, memory_order_acquire);
        if (atomic_load(&p->quit))
            return NULL;
        p->fn(p->arg, ith, p->n);
        gt_cpu_barrier(p); /* the join: run() returns after this barrier */
    }
}

int gt_cpu_pool_new(int n_threads, gt_cpu_pool **out, gt_err *err)
{
    *out = NULL;
    if (n_threads < 1)
        n_threads = 1;
    gt_cpu_pool *p = calloc(1, sizeof *p);
    if (!p)
        return gt_err_set(err, "out of memory creating the thread pool");
    p->n = n_threads;
    atomic_init(&p->quit, false);
    atomic_init(&p->bar_count, 0);
    if (signal_init(&p->job) != 0) {
        free(p);
        return gt_err_set(err, "cannot initialise thread pool synchronisation");
    }
    if (signal_init(&p->bar) != 0) {
        signal_destroy(&p->job);
        free(p);
        return gt_err_set(err, "cannot initialise thread pool synchronisation");
    }
    if (n_threads > 1) {
        p->threads = calloc((size_t)n_threads - 1, sizeof *p->threads);
        if (!p->threads) {
            gt_cpu_pool_free(p);
            return gt_err_set(err, "out of memory creating the thread pool");
        }
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) {
            gt_cpu_pool_free(p);
            return gt_err_set(err, "out of memory creating the thread pool");
        }
        wa->p = p;
        wa->ith = i;
        if (pthread_create(&p->threads[i - 1], NULL, worker_main, wa) != 0) {
            free(wa);
            gt_cpu_pool_free(p);
            return gt_err_set(err, "cannot create worker thread %d of %d", i, n_threads);
        }
        p->started++;
    }
    *out = p;
    return 0;
}

void gt_cpu_pool_free(gt_cpu_pool *p)
{
    if (!p)
        return;
    atomic_store(&p->quit, true);
    signal_bump(&p->job);
    for (int i = 0; i < p->started; i++)
        pthread_join(p->threads[i], NULL);
    free(p->threads);
    signal_destroy(&p->job);
    signal_destroy(&p->bar);
    free(p);
}

void gt_cpu_pool_run(gt_cpu_pool *p, gt_cpu_task_fn fn, void *arg)
{
    if (p->n <= 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    signal_bump(&p->job); /* seq_cst: publishes fn and arg */
    fn(arg, 0, p->n);
    gt_cpu_barrier(p);
}
