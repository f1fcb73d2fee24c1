/* serve_server.h: what serve_http.c (the HTTP side) and serve_worker.c (the
 * thread that owns the session) share: the job a request becomes, the
 * server, and the sink a job's stream writes to. Private to harness/serve.
 *
 * One mutex (server.mu) guards the queue, every job's fields and the
 * in-flight count; jobs are reference-counted (the HTTP side and the
 * worker), so whichever lets go last frees it. */
#ifndef GT_SERVE_SERVER_H
#define GT_SERVE_SERVER_H

#include <pthread.h>
#include <stdbool.h>

#include <microhttpd.h>

#include "serve.h"

typedef struct job {
    gt_server *srv;
    gt_serve_req req;
    int32_t *ids;
    int n_ids;
    double deadline;
    double t_enqueued;
    int refs;
    bool done, cancelled;
    int status;   /* plain requests: HTTP status of body */
    char *body;   /* plain requests: the answer JSON */
    char *out;    /* streams: SSE bytes not yet sent */
    size_t out_len, out_sent, out_cap;
    pthread_cond_t cv;
    struct job *next;
} job;

struct gt_server {
    gt_serve_ctx *ctx;
    gt_server_opts o;
    struct MHD_Daemon *d;
    int port;
    pthread_mutex_t mu;
    pthread_cond_t queue_cv; /* the worker waits for jobs */
    pthread_cond_t idle_cv;  /* shutdown waits for in-flight requests */
    job *head, *tail;
    int queued;    /* waiting in the FIFO (not yet holding a slot) */
    int running;   /* holding a slot (being generated) */
    int in_flight; /* requests received and not yet fully answered */
    bool stopping, quit;
    pthread_t worker;
    bool worker_started;
};

/* With s->mu held: drops one reference, freeing the job with the last. */
void gt_serve_job_release_locked(job *j);
/* A job's sink: SSE bytes to its stream, and whether its client went away. */
void gt_serve_job_write(void *ud, const char *data, size_t n);
bool gt_serve_job_cancelled(void *ud);
/* The worker thread (serve_worker.c): takes jobs from the queue until
 * s->quit with the queue empty; one at a time on a one-sequence session,
 * else up to gt_session_n_seq of them decoded together. */
void *gt_serve_worker_main(void *server);

#endif
