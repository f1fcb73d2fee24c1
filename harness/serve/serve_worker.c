/* serve_worker.c: the thread that owns the model session.
 *
 * On a one-sequence session (--parallel 1, the default) it takes jobs from
 * the FIFO one at a time and runs each to its end with gt_serve_generate.
 *
 * On a session of N sequences (--parallel N) it batches continuously: each
 * sequence is a slot; a queued job takes a free slot as soon as there is
 * one, and every step is one gt_session_eval_seqs call carrying the one
 * token each running request sampled last, plus one call per request just
 * admitted, carrying its whole prompt. A prompt is not packed beside the
 * decode tokens because the cpu backend picks its matmul path by the rows
 * of the whole batch (the dot path below blas_min_batch rows, BLAS or the
 * integer GEMM from there), and the paths round differently: a prompt
 * beside the decode tokens moved them onto another path than they take
 * alone, and with GT_CPU_ACT=q8, whose 8-bit rounding amplifies a last-bit
 * difference, a temperature-0 answer changed. Alone, a prompt takes the
 * path it takes on a one-sequence server, and N decode rows (N below
 * blas_min_batch) take the dot path, whose 4-row kernels give each row the
 * bytes it gets alone (test_batching cpu_rows_alone). A request that
 * finishes, fails, times out or whose client went away answers and frees
 * its slot (gt_session_seq_truncate to 0) in the same step, and the next
 * queued job takes it before the next eval. Each request keeps its own
 * sampler, stop strings, deadline and sink (serve_gen.c's state machine),
 * and the runtime promises a sequence's logits do not depend on what else
 * is in the batch, so a temperature-0 answer is the one it gets alone.
 *
 * Locking: s->mu is held only to take jobs and to publish their answers;
 * generation (which writes to sinks, which lock s->mu) runs without it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "serve_server.h"

/* A stream's 200 is out: its error goes in the stream. */
static void stream_error(job *j, const gt_serve_error *e)
{
    char *ej = gt_serve_error_json(e);
    gt_serve_job_write(j, "data: ", 6);
    gt_serve_job_write(j, ej ? ej : "{}", ej ? strlen(ej) : 2);
    gt_serve_job_write(j, "\n\ndata: [DONE]\n\n", 16);
    free(ej);
}

/* A job answered without running: the client went away, or it waited past
 * its deadline in the queue. Returns -1 with e filled, or 0 to run it. */
static int refuse_before_run(gt_server *s, job *j, bool cancelled, double t0, gt_serve_error *e)
{
    if (cancelled)
        return gt_serve_fail(e, 499, "cancelled", NULL, "the client went away");
    if (t0 <= j->deadline)
        return 0;
    gt_serve_fail(e, 504, "timeout_error", NULL,
                  "the request waited in the queue past the server's per-request timeout "
                  "(%.0f s)", s->o.timeout_s);
    if (j->req.stream)
        stream_error(j, e);
    return -1;
}

/* Logs the job, publishes its answer and lets go of it (s->mu not held). */
static void complete(gt_server *s, job *j, int rc, gt_serve_error *e, char *body, double t0)
{
    if (!s->o.quiet)
        fprintf(stderr, "gauntlet serve: completion%s: %d prompt tokens, max %d: %s%s "
                        "(queued %.3f s, ran %.3f s)\n",
                j->req.stream ? " (stream)" : "", j->n_ids, j->req.max_tokens,
                rc ? "error: " : "ok", rc ? e->message : "", t0 - j->t_enqueued, gt_now() - t0);
    pthread_mutex_lock(&s->mu);
    if (!j->req.stream) {
        j->status = rc ? e->status : 200;
        j->body = rc ? gt_serve_error_json(e) : body;
    } else {
        free(body);
    }
    j->done = true;
    pthread_cond_broadcast(&j->cv);
    gt_serve_job_release_locked(j);
    pthread_mutex_unlock(&s->mu);
}

/* With s->mu held: the queue's first job, or NULL. */
static job *pop_locked(gt_server *s)
{
    job *j = s->head;
    if (!j)
        return NULL;
    s->head = j->next;
    if (!s->head)
        s->tail = NULL;
    s->queued--;
    return j;
}

static void serial(gt_server *s)
{
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->quit)
            pthread_cond_wait(&s->queue_cv, &s->mu);
        job *j = pop_locked(s);
        if (!j)
            break;
        bool cancelled = j->cancelled;
        s->running++;
        pthread_mutex_unlock(&s->mu);

        const double t0 = gt_now();
        gt_serve_error e = {0};
        char *body = NULL;
        gt_serve_sink sink = {j->req.stream ? gt_serve_job_write : NULL, gt_serve_job_cancelled, j};
        int rc = refuse_before_run(s, j, cancelled, t0, &e);
        if (rc == 0)
            rc = gt_serve_generate(s->ctx, &j->req, j->ids, j->n_ids, j->deadline, &sink,
                                   j->req.stream ? NULL : &body, &e);
        pthread_mutex_lock(&s->mu);
        s->running--;
        pthread_mutex_unlock(&s->mu);
        complete(s, j, rc, &e, body, t0);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
}

/* One sequence of the session and the request that holds it. */
typedef struct slot {
    job *j;           /* NULL: free */
    gt_serve_gen *g;
    gt_serve_sink sink; /* g points at it: it lives as long as the slot is held */
    double t0;        /* when the job took the slot */
    bool broken;      /* its sequence could not be emptied: never used again */
} slot;

/* Ends slot k's request with rc (the last step's) and empties its sequence. */
static void release(gt_server *s, slot *sl, int k, int rc, gt_serve_error *e)
{
    slot *t = &sl[k];
    char *body = NULL;
    rc = gt_serve_gen_end(t->g, rc, t->j->req.stream ? NULL : &body, e);
    gt_err err = {{0}};
    if (gt_session_seq_truncate(s->ctx->session, k, 0, &err) != 0) {
        /* Its positions would leak into the next holder's answers. */
        fprintf(stderr, "gauntlet serve: slot %d cannot be emptied (%s); it is not used again\n",
                k, err.msg);
        t->broken = true;
    }
    pthread_mutex_lock(&s->mu);
    s->running--;
    pthread_mutex_unlock(&s->mu);
    complete(s, t->j, rc, e, body, t->t0);
    t->j = NULL;
    t->g = NULL;
}

/* Gives slot k to job j (s->mu not held); false when j was answered at once. */
static bool admit(gt_server *s, slot *sl, int k, job *j, bool cancelled)
{
    slot *t = &sl[k];
    const double t0 = gt_now();
    gt_serve_error e = {0};
    int rc = refuse_before_run(s, j, cancelled, t0, &e);
    t->sink = (gt_serve_sink){j->req.stream ? gt_serve_job_write : NULL, gt_serve_job_cancelled, j};
    gt_serve_gen *g = rc == 0 ? gt_serve_gen_new(s->ctx, &j->req, j->ids, j->n_ids, j->deadline,
                                                 &t->sink, &e)
                              : NULL;
    if (!g) {
        pthread_mutex_lock(&s->mu);
        s->running--;
        pthread_mutex_unlock(&s->mu);
        complete(s, j, -1, &e, NULL, t0);
        return false;
    }
    *t = (slot){.j = j, .g = g, .sink = t->sink, .t0 = t0};
    return true;
}

/* Evaluates the n_e entries in one call and advances each one's request;
 * a request that ends frees its slot. */
static void step_group(gt_server *s, gt_session *ses, slot *sl, const gt_seq_eval *ev, int n_e,
                       int *active, int *usable)
{
    gt_err err = {{0}};
    const int rc = gt_session_eval_seqs(ses, ev, n_e, &err);
    for (int i = 0; i < n_e; i++) {
        const int k = ev[i].seq;
        gt_serve_error e = {0};
        const int st = rc != 0 ? gt_serve_gen_eval_failed(sl[k].g, err.msg, &e)
                               : gt_serve_gen_step(sl[k].g, &e);
        if (st != 1) {
            release(s, sl, k, st, &e);
            (*active)--;
            *usable -= sl[k].broken;
        }
    }
}

static void batched(gt_server *s, int n)
{
    gt_session *ses = s->ctx->session;
    slot *sl = calloc((size_t)n, sizeof *sl);
    gt_seq_eval *ev = calloc((size_t)n, sizeof *ev);
    if (!sl || !ev) {
        fprintf(stderr, "gauntlet serve: out of memory for %d slots; answering one at a time\n",
                n);
        free(sl);
        free(ev);
        serial(s);
        return;
    }
    int active = 0, usable = n;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!active && !s->head && !s->quit)
            pthread_cond_wait(&s->queue_cv, &s->mu);
        if (!active && !s->head)
            break;
        /* Admit into free slots, lowest first. */
        for (int k = 0; k < n && s->head; k++) {
            if (sl[k].j || sl[k].broken)
                continue;
            job *j = pop_locked(s);
            const bool cancelled = j->cancelled;
            s->running++;
            pthread_mutex_unlock(&s->mu);
            active += admit(s, sl, k, j, cancelled);
            pthread_mutex_lock(&s->mu);
        }
        /* No slot left to run on (a runtime failure): answer, never strand. */
        while (!usable && s->head) {
            job *j = pop_locked(s);
            pthread_mutex_unlock(&s->mu);
            gt_serve_error e;
            gt_serve_fail(&e, 500, "server_error", NULL,
                          "no sequence of the session can be reused (see the server's log)");
            if (j->req.stream)
                stream_error(j, &e);
            complete(s, j, -1, &e, NULL, gt_now());
            pthread_mutex_lock(&s->mu);
        }
        pthread_mutex_unlock(&s->mu);

        /* Decode tokens first, together; then each prompt in an eval of
         * its own (see the top of this file). */
        int m = 0, n_dec = 0;
        for (int k = 0; k < n; k++)
            if (sl[k].j) {
                gt_serve_gen_next_eval(sl[k].g, &ev[m]);
                ev[m++].seq = k;
            }
        for (int i = 0; i < m; i++)
            if (ev[i].n == 1) {
                const gt_seq_eval t = ev[n_dec];
                ev[n_dec++] = ev[i];
                ev[i] = t;
            }
        if (n_dec > 0)
            step_group(s, ses, sl, ev, n_dec, &active, &usable);
        for (int i = n_dec; i < m; i++)
            step_group(s, ses, sl, ev + i, 1, &active, &usable);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    free(sl);
    free(ev);
}

void *gt_serve_worker_main(void *server)
{
    gt_server *s = server;
    const int n = gt_session_n_seq(s->ctx->session);
    if (n > 1)
        batched(s, n);
    else
        serial(s);
    return NULL;
}
