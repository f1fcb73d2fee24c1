/* serve_http.c: the HTTP side of `gauntlet serve` (libmicrohttpd).
 *
 * Threads: libmicrohttpd runs one thread per connection; those threads
 * parse, validate and tokenize, then hand a job to a bounded FIFO and wait.
 * One worker thread (serve_worker.c) owns the model session, so the session
 * needs no locking; it runs jobs one at a time, or with --parallel N up to
 * N of them decoded together, each in its own sequence. Blocking in a
 * connection thread is what thread-per-connection mode is for: a plain
 * request waits on its job's condition variable; a streaming one answers
 * 200 at once with a content-reader callback that blocks until the worker
 * appends the next SSE frame.
 *
 * One mutex (server.mu) guards the queue, every job's fields and the
 * in-flight count; jobs are reference-counted (the HTTP side and the
 * worker), so whichever lets go last frees it. A streaming client that goes
 * away marks its job cancelled and the worker stops generating.
 *
 * Overload and abuse are answered, never queued without bound: a full queue
 * is 503 with Retry-After; a body past the limit is 413 (checked against
 * Content-Length before reading, and while reading); a request waiting or
 * running past the timeout is 504. Shutdown stops accepting, lets every
 * request already received finish, then stops. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "base.h"
#include "serve_server.h"

/* Per request (con_cls): the body as it arrives. */
typedef struct conn {
    char *body;
    size_t len, cap;
    bool too_large;
    bool chat; /* POST /v1/chat/completions */
} conn;

/* ---- responses ---------------------------------------------------------- */

static enum MHD_Result respond(struct MHD_Connection *c, int status, char *json,
                               const char *allow)
{
    if (!json)
        return MHD_NO;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(json), json, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(json);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (status == 503)
        MHD_add_response_header(r, "Retry-After", "1");
    if (allow)
        MHD_add_response_header(r, "Allow", allow);
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result respond_error(struct MHD_Connection *c, const gt_serve_error *e,
                                     const char *allow)
{
    return respond(c, e->status, gt_serve_error_json(e), allow);
}

static enum MHD_Result fail(struct MHD_Connection *c, int status, const char *type,
                            const char *allow, const char *msg)
{
    gt_serve_error e;
    gt_serve_fail(&e, status, type, NULL, "%s", msg);
    return respond_error(c, &e, allow);
}

static enum MHD_Result respond_models(gt_server *s, struct MHD_Connection *c)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(o, "data");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", s->ctx->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", 0);
    cJSON_AddStringToObject(m, "owned_by", "gauntlet");
    cJSON_AddNumberToObject(m, "context_length", gt_session_n_ctx(s->ctx->session));
    /* Who answers, for a harness's environment table (llama-server says it in /props). */
    cJSON *who = cJSON_AddObjectToObject(m, "server");
    cJSON_AddStringToObject(who, "name", "gauntlet serve");
    cJSON_AddStringToObject(who, "version", GT_VERSION);
    cJSON_AddStringToObject(who, "commit", GT_GIT_SHA);
    cJSON_AddStringToObject(who, "backend", gt_session_backend(s->ctx->session)->info.backend);
    cJSON_AddItemToArray(data, m);
    char *json = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return respond(c, 200, json, NULL);
}

static enum MHD_Result respond_health(gt_server *s, struct MHD_Connection *c)
{
    pthread_mutex_lock(&s->mu);
    int queued = s->queued, running = s->running;
    bool stopping = s->stopping;
    pthread_mutex_unlock(&s->mu);
    char *json = malloc(128);
    if (!json)
        return MHD_NO;
    /* slots: requests decoded together (--parallel); running: holding one. */
    snprintf(json, 128, "{\"status\":\"%s\",\"queued\":%d,\"running\":%d,\"slots\":%d}",
             stopping ? "stopping" : "ok", queued, running,
             gt_session_n_seq(s->ctx->session));
    return respond(c, stopping ? 503 : 200, json, NULL);
}

/* ---- streaming ---------------------------------------------------------- */

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    job *j = cls;
    pthread_mutex_lock(&j->srv->mu);
    while (j->out_sent == j->out_len && !j->done)
        pthread_cond_wait(&j->cv, &j->srv->mu);
    ssize_t n;
    if (j->out_sent < j->out_len) {
        size_t k = j->out_len - j->out_sent < max ? j->out_len - j->out_sent : max;
        memcpy(buf, j->out + j->out_sent, k);
        j->out_sent += k;
        n = (ssize_t)k;
    } else {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    }
    pthread_mutex_unlock(&j->srv->mu);
    return n;
}

static void stream_free(void *cls)
{
    job *j = cls;
    gt_server *s = j->srv;
    pthread_mutex_lock(&s->mu);
    j->cancelled = true; /* if the worker is still at it, it may stop */
    gt_serve_job_release_locked(j);
    pthread_mutex_unlock(&s->mu);
}

/* ---- /v1/completions and /v1/chat/completions --------------------------- */

/* The body is always parsed as JSON. Accepted: no Content-Type,
 * application/json, and application/x-www-form-urlencoded, because that is
 * what `curl -d '{...}'` sends; a real form body then fails as bad JSON.
 * Anything else (text/plain, multipart/form-data, ...) says the client
 * meant something other than JSON, and gets told so. */
static bool json_content_type(struct MHD_Connection *c)
{
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    if (!ct)
        return true;
    while (*ct == ' ')
        ct++;
    static const char *const ok[] = {"application/json", "application/x-www-form-urlencoded"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        size_t n = strlen(ok[i]);
        if (strncasecmp(ct, ok[i], n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' '))
            return true;
    }
    return false;
}

static bool peer_gone(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static enum MHD_Result completion(gt_server *s, struct MHD_Connection *c, conn *cc)
{
    if (cc->too_large) {
        char msg[128];
        snprintf(msg, sizeof msg, "the request body exceeds the server's limit of %zu bytes",
                 s->o.max_body);
        return fail(c, 413, "invalid_request_error", NULL, msg);
    }
    if (!json_content_type(c))
        return fail(c, 400, "invalid_request_error", NULL,
                    "Content-Type must be application/json");
    gt_serve_error e = {0};
    job *j = calloc(1, sizeof *j);
    if (!j)
        return fail(c, 500, "server_error", NULL, "out of memory");
    if ((cc->chat ? gt_serve_parse_chat : gt_serve_parse)(
            cc->body ? cc->body : "", cc->len, gt_session_n_ctx(s->ctx->session), &j->req, &e) != 0) {
        free(j);
        return respond_error(c, &e, NULL);
    }
    if (j->req.model && strcmp(j->req.model, s->ctx->model_id) != 0) {
        /* As OpenAI: a model the server does not have is a 404, not a
         * silent answer from another model. */
        gt_serve_fail(&e, 404, "invalid_request_error", "model",
                      "the model '%s' does not exist here; this server has '%s' (GET /v1/models)",
                      j->req.model, s->ctx->model_id);
        e.code = "model_not_found";
        gt_serve_req_free(&j->req);
        free(j);
        return respond_error(c, &e, NULL);
    }
    j->ids = gt_serve_tokenize(s->ctx, &j->req, &j->n_ids, &e);
    if (j->ids && gt_serve_compile_format(s->ctx, &j->req, &e) != 0) {
        free(j->ids);
        j->ids = NULL;
    }
    if (!j->ids) {
        gt_serve_req_free(&j->req);
        free(j);
        return respond_error(c, &e, NULL);
    }
    j->srv = s;
    j->refs = 2; /* this side and the worker */
    j->t_enqueued = gt_now();
    j->deadline = j->t_enqueued + s->o.timeout_s;
    pthread_cond_init(&j->cv, NULL);

    pthread_mutex_lock(&s->mu);
    if (s->stopping || s->queued >= s->o.queue) {
        const bool stopping = s->stopping;
        j->refs = 1;
        gt_serve_job_release_locked(j);
        pthread_mutex_unlock(&s->mu);
        return fail(c, 503, stopping ? "server_error" : "overloaded_error", NULL,
                    stopping ? "the server is shutting down"
                             : "the server's request queue is full; retry later");
    }
    if (s->tail)
        s->tail->next = j;
    else
        s->head = j;
    s->tail = j;
    s->queued++;
    pthread_cond_signal(&s->queue_cv);

    if (j->req.stream) {
        pthread_mutex_unlock(&s->mu);
        struct MHD_Response *r =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_reader, j,
                                              stream_free);
        if (!r) {
            stream_free(j);
            return MHD_NO;
        }
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        enum MHD_Result rc = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return rc;
    }
    /* Waiting, watch the socket: a client that hung up cancels its job
     * rather than leave the worker generating for nobody. */
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    const int fd = ci ? ci->connect_fd : -1;
    while (!j->done) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&j->cv, &s->mu, &ts);
        if (!j->done && !j->cancelled && fd >= 0 && peer_gone(fd))
            j->cancelled = true;
    }
    int status = j->status;
    char *body = j->body;
    j->body = NULL;
    gt_serve_job_release_locked(j);
    pthread_mutex_unlock(&s->mu);
    return respond(c, status, body, NULL);
}

/* ---- routing ------------------------------------------------------------ */

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version,
                                 const char *upload_data, size_t *upload_size, void **con_cls)
{
    (void)version;
    gt_server *s = cls;
    conn *cc = *con_cls;
    const bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    const bool post = !strcmp(method, "POST");
    const bool is_chat = !strcmp(url, "/v1/chat/completions");
    const bool is_completions = is_chat || !strcmp(url, "/v1/completions");
    if (!cc) {
        cc = calloc(1, sizeof *cc);
        if (!cc)
            return MHD_NO;
        *con_cls = cc;
        cc->chat = is_chat;
        pthread_mutex_lock(&s->mu);
        s->in_flight++;
        pthread_mutex_unlock(&s->mu);
        if (is_completions && post) {
            const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
            const unsigned long long announced = cl ? strtoull(cl, NULL, 10) : 0;
            if (announced > s->o.max_body) {
                cc->too_large = true;
                /* Up to 16x the limit is read and dropped before the 413:
                 * answering first and closing makes a client that is still
                 * sending see a reset instead of the answer. Past that,
                 * answer at once rather than read it all. */
                if (announced > 16ull * s->o.max_body)
                    return completion(s, c, cc);
            }
            return MHD_YES; /* the body follows */
        }
        if (!strcmp(url, "/health"))
            return get ? respond_health(s, c)
                       : fail(c, 405, "invalid_request_error", "GET", "use GET /health");
        if (!strcmp(url, "/v1/models"))
            return get ? respond_models(s, c)
                       : fail(c, 405, "invalid_request_error", "GET", "use GET /v1/models");
        if (is_completions)
            return fail(c, 405, "invalid_request_error", "POST",
                        is_chat ? "use POST /v1/chat/completions with a JSON body"
                                : "use POST /v1/completions with a JSON body");
        char msg[300];
        snprintf(msg, sizeof msg, "no route %s %.200s (try POST /v1/completions, POST "
                                  "/v1/chat/completions, GET /v1/models, GET /health)",
                 method, url);
        return fail(c, 404, "invalid_request_error", NULL, msg);
    }
    if (*upload_size > 0) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (cc->too_large)
            return MHD_YES; /* drain it; the 413 comes at the end */
        if (cc->len + n > s->o.max_body) {
            cc->too_large = true;
            free(cc->body);
            cc->body = NULL;
            cc->len = cc->cap = 0;
            return MHD_YES;
        }
        if (cc->len + n + 1 > cc->cap) {
            size_t cap = cc->cap ? cc->cap : 4096;
            while (cap < cc->len + n + 1)
                cap *= 2;
            char *p = realloc(cc->body, cap);
            if (!p)
                return MHD_NO;
            cc->body = p;
            cc->cap = cap;
        }
        memcpy(cc->body + cc->len, upload_data, n);
        cc->len += n;
        cc->body[cc->len] = '\0';
        return MHD_YES;
    }
    return completion(s, c, cc);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)c;
    (void)toe;
    gt_server *s = cls;
    conn *cc = *con_cls;
    if (!cc)
        return;
    free(cc->body);
    free(cc);
    *con_cls = NULL;
    pthread_mutex_lock(&s->mu);
    s->in_flight--;
    pthread_cond_broadcast(&s->idle_cv);
    pthread_mutex_unlock(&s->mu);
}

/* ---- lifecycle ---------------------------------------------------------- */

int gt_server_start(gt_serve_ctx *ctx, const gt_server_opts *o, gt_server **out, gt_err *err)
{
    gt_server *s = calloc(1, sizeof *s);
    if (!s)
        return gt_err_set(err, "out of memory");
    s->ctx = ctx;
    s->o = *o;
    if (!s->o.host)
        s->o.host = "127.0.0.1";
    if (s->o.queue <= 0)
        s->o.queue = 32;
    if (!s->o.max_body)
        s->o.max_body = 1 << 20;
    if (s->o.timeout_s <= 0)
        s->o.timeout_s = 120;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->queue_cv, NULL);
    pthread_cond_init(&s->idle_cv, NULL);

    struct sockaddr_storage ss = {0};
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_ITC | MHD_USE_ERROR_LOG | MHD_USE_AUTO;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, s->o.host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)o->port);
    } else if (inet_pton(AF_INET6, s->o.host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)o->port);
        flags |= MHD_USE_IPv6;
    } else {
        free(s);
        return gt_err_set(err, "--host '%s' is not a numeric IPv4 or IPv6 address", o->host);
    }
    if (pthread_create(&s->worker, NULL, gt_serve_worker_main, s) != 0) {
        free(s);
        return gt_err_set(err, "cannot start the worker thread");
    }
    s->worker_started = true;
    s->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_access, s,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)(s->o.queue + 64),
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60, MHD_OPTION_END);
    if (!s->d) {
        gt_server_stop(s);
        return gt_err_set(err, "cannot listen on %s port %d (in use, or not an address of "
                               "this machine?)", o->host, o->port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : o->port;
    *out = s;
    return 0;
}

int gt_server_port(const gt_server *s) { return s->port; }

void gt_server_stop(gt_server *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_mutex_unlock(&s->mu);
    if (s->d) {
        MHD_socket ls = MHD_quiesce_daemon(s->d);
        if (ls != MHD_INVALID_SOCKET)
            close(ls);
        /* Everything already received gets its answer; each is bounded by
         * the request timeout, so this wait is too. */
        const double limit = gt_now() + s->o.timeout_s + 5;
        pthread_mutex_lock(&s->mu);
        while (s->in_flight > 0 && gt_now() < limit) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 100 * 1000 * 1000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&s->idle_cv, &s->mu, &ts);
        }
        pthread_mutex_unlock(&s->mu);
        MHD_stop_daemon(s->d);
    }
    if (s->worker_started) {
        pthread_mutex_lock(&s->mu);
        s->quit = true;
        pthread_cond_signal(&s->queue_cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->worker, NULL);
    }
    /* Jobs still queued here had their connections closed by the stop. */
    while (s->head) {
        job *j = s->head;
        s->head = j->next;
        gt_serve_job_release_locked(j);
    }
    pthread_cond_destroy(&s->idle_cv);
    pthread_cond_destroy(&s->queue_cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
