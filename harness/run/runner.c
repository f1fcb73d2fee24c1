/* runner.c: the process pool behind `gauntlet qualify` (see runner.h).
 *
 * One thread, one poll() loop over every running child's two pipes (results
 * on fd 3, log on stdout/stderr), waking at least every 100 ms to check
 * deadlines and the interrupt flag. Reading both pipes continuously matters:
 * a worker that logs a lot would otherwise block on a full pipe and look
 * hung. Children are reaped with WNOHANG once both pipes are closed, so a
 * child that closes its descriptors but never exits still meets its
 * deadline. */
#include "runner.h"
#include "worker_lines.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LOG_CAP (16 * 1024)

static volatile sig_atomic_t g_stop;

bool gt_runner_interrupted(void) { return g_stop != 0; }

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double unix_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct slot {
    gt_job *job;
    pid_t pid;
    int fd_res, fd_log;   /* -1 once closed */
    double t_start, deadline;
    bool killed;          /* by the deadline */
    gt_wlines res;        /* partial result line */
    gt_outcome o;
    size_t log_len;
} slot;

static void log_append(slot *s, const char *data, size_t n)
{
    if (n >= LOG_CAP) {
        data += n - (LOG_CAP - 1);
        n = LOG_CAP - 1;
    }
    if (s->log_len + n >= LOG_CAP) { /* keep the tail: the last lines explain a crash */
        size_t drop = s->log_len + n - (LOG_CAP - 1);
        memmove(s->o.log, s->o.log + drop, s->log_len - drop);
        s->log_len -= drop;
    }
    memcpy(s->o.log + s->log_len, data, n);
    s->log_len += n;
    s->o.log[s->log_len] = '\0';
}

/* One line from fd 3 (gt_wlines_fn): parsed into the outcome; a bad one is
 * quoted in the log, where the verdict's reason will point. */
static void take_line(void *user, char *text)
{
    slot *s = user;
    int held = gt_wlines_take(&s->o, text);
    if (held < 0) {
        log_append(s, "[fd3] ", 6);
        log_append(s, text, strlen(text));
        log_append(s, "\n", 1);
    } else if (held == 1) {
        s->o.hello_ms = (mono() - s->t_start) * 1e3;
    }
}

static void read_results(slot *s)
{
    char buf[65536];
    ssize_t n = read(s->fd_res, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        close(s->fd_res);
        s->fd_res = -1;
        gt_wlines_end(&s->res, take_line, s);
        return;
    }
    gt_wlines_feed(&s->res, buf, (size_t)n, take_line, s);
}

/* A stopped child's last words: whatever is left in its result pipe, up to
 * end of file or an empty pipe (a grandchild could hold the write end open,
 * so never block). A partial last line stays unparsed in s->res. */
static void drain_results(slot *s)
{
    char buf[65536];
    while (s->fd_res >= 0) {
        ssize_t n = read(s->fd_res, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            close(s->fd_res);
            s->fd_res = -1;
            break;
        }
        gt_wlines_feed(&s->res, buf, (size_t)n, take_line, s);
    }
}

static void read_log(slot *s)
{
    char buf[16384];
    ssize_t n = read(s->fd_log, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        close(s->fd_log);
        s->fd_log = -1;
        return;
    }
    log_append(s, buf, (size_t)n);
}

/* In the child: wire the pipes to 0/1/2/3, limit, and exec the worker. */
static void child(const char *self, int spec_r, int log_w, int res_w, int64_t memory_mb,
                  pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(126);
    setpgid(0, 0);
    /* Move the pipes above 3 first so no dup2 below overwrites one of them. */
    int a = fcntl(spec_r, F_DUPFD, 10), b = fcntl(log_w, F_DUPFD, 10),
        c = fcntl(res_w, F_DUPFD, 10);
    if (a < 0 || b < 0 || c < 0 || dup2(a, 0) < 0 || dup2(b, 1) < 0 || dup2(b, 2) < 0 ||
        dup2(c, 3) < 0)
        _exit(125);
    closefrom(4);
#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer maps terabytes of shadow memory: an address-space
     * limit would stop every worker from starting. */
    (void)memory_mb;
#else
    if (memory_mb > 0) {
        struct rlimit rl = {(rlim_t)memory_mb << 20, (rlim_t)memory_mb << 20};
        setrlimit(RLIMIT_AS, &rl);
    }
#endif
    struct sigaction sa = {.sa_handler = SIG_DFL};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGPIPE, &sa, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execl(self, "gauntlet", "worker", (char *)NULL);
    dprintf(2, "cannot execute %s: %s\n", self, strerror(errno));
    _exit(127);
}

static int start(const gt_runner_opts *opts, slot *s, gt_job *job)
{
    memset(s, 0, sizeof *s);
    s->job = job;
    s->fd_res = s->fd_log = -1;
    s->o.lines = cJSON_CreateArray();
    s->o.log = malloc(LOG_CAP);
    s->o.worker_s = -1;
    s->o.hello_ms = -1;
    if (!s->o.lines || !s->o.log)
        return -1;
    s->o.log[0] = '\0';
    s->o.started_at = unix_now();
    s->t_start = mono();
    s->deadline = s->t_start + job->timeout_s;
    int sp[2], lp[2], rp[2];
    if (pipe2(sp, O_CLOEXEC) != 0)
        goto spawn_fail;
    if (pipe2(lp, O_CLOEXEC) != 0) {
        close(sp[0]), close(sp[1]);
        goto spawn_fail;
    }
    if (pipe2(rp, O_CLOEXEC) != 0) {
        close(sp[0]), close(sp[1]), close(lp[0]), close(lp[1]);
        goto spawn_fail;
    }
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        child(opts->self_exe, sp[0], lp[1], rp[1], job->memory_mb, parent);
    close(sp[0]);
    close(lp[1]);
    close(rp[1]);
    if (pid < 0) {
        close(sp[1]), close(lp[0]), close(rp[0]);
        goto spawn_fail;
    }
    setpgid(pid, pid); /* also in the child: whichever runs first */
    s->pid = pid;
    s->fd_log = lp[0];
    s->fd_res = rp[0];
    /* Specs are a few KiB, well under a pipe's buffer; a child that dies
     * before reading gives EPIPE (SIGPIPE is ignored), which its exit status
     * will explain. */
    const char *p = job->spec;
    size_t left = strlen(p);
    while (left) {
        ssize_t w = write(sp[1], p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        p += w, left -= (size_t)w;
    }
    close(sp[1]);
    fcntl(s->fd_res, F_SETFL, O_NONBLOCK);
    fcntl(s->fd_log, F_SETFL, O_NONBLOCK);
    return 0;
spawn_fail:
    s->o.end = GT_END_SPAWN;
    snprintf(s->o.log, LOG_CAP, "cannot start a worker: %s\n", strerror(errno));
    return 1;
}

static void release(slot *s)
{
    if (s->fd_res >= 0)
        close(s->fd_res);
    if (s->fd_log >= 0)
        close(s->fd_log);
    gt_wlines_free(&s->res);
    cJSON_Delete(s->o.lines);
    free(s->o.log);
    memset(s, 0, sizeof *s);
}

typedef struct tally {
    int done, by_status[GT_ST_COUNT];
    double wall_sum;
} tally;

static void fmt_secs(char *out, size_t cap, double s)
{
    if (s < 60)
        snprintf(out, cap, "%.0fs", s);
    else if (s < 3600)
        snprintf(out, cap, "%dm%02ds", (int)s / 60, (int)s % 60);
    else
        snprintf(out, cap, "%dh%02dm", (int)s / 3600, (int)s % 3600 / 60);
}

static void progress(const gt_runner_opts *o, const tally *t, const slot *slots, int n_slots,
                     int remaining)
{
    if (!o->progress)
        return;
    char eta[32] = "?";
    int done = t->done + o->already_done;
    if (t->done > 0)
        fmt_secs(eta, sizeof eta, t->wall_sum / t->done * remaining / (o->jobs > 0 ? o->jobs : 1));
    const char *cur = "";
    for (int i = 0; i < n_slots; i++)
        if (slots[i].job)
            cur = slots[i].job->cell_id;
    int other = t->by_status[GT_ST_ERROR] + t->by_status[GT_ST_CRASH] +
                t->by_status[GT_ST_TIMEOUT] + t->by_status[GT_ST_XPASS];
    fprintf(stderr, "\r\033[K[%d/%d] pass %d  fail %d  xfail %d  skip %d  other %d  | %s | ETA %s",
            done, o->total, t->by_status[GT_ST_PASS], t->by_status[GT_ST_FAIL],
            t->by_status[GT_ST_XFAIL], t->by_status[GT_ST_SKIP], other, cur, eta);
    fflush(stderr);
}

static int finish(const gt_runner_opts *opts, slot *s, tally *t, gt_err *err)
{
    s->o.finished_at = unix_now();
    s->o.wall_s = mono() - s->t_start;
    gt_report rep = {.status = GT_ST_ERROR, .overhead_ms = -1};
    int rc = opts->done(opts->user, s->job, &s->o, &rep, err);
    t->done++;
    t->wall_sum += s->o.wall_s;
    if (rep.status >= 0 && rep.status < GT_ST_COUNT)
        t->by_status[rep.status]++;
    if (!opts->quiet && opts->out) {
        if (opts->progress)
            fputs("\r\033[K", stderr);
        char oh[128] = "";
        if (rep.overhead_ms >= 0)
            snprintf(oh, sizeof oh, "  [harness %.1f ms: start %.1f, commit %.1f; exit %.1f ms]",
                     rep.overhead_ms, s->o.hello_ms, rep.commit_ms, rep.teardown_ms);
        fprintf(opts->out, "[%*d/%d] %-7s %7.3fs  %s%s%s%s\n", opts->total >= 100 ? 3 : 2,
                t->done + opts->already_done, opts->total, gt_status_name(rep.status),
                s->o.wall_s, s->job->cell_id, oh, rep.reason[0] ? "\n          " : "",
                rep.reason);
        fflush(opts->out);
    }
    release(s);
    return rc;
}

/* The first waiting job whose dependency has finished; -1 when every
 * waiting job depends on one still running. With nothing running, a job
 * waiting on a job that never ran (a cycle, a bad index) starts anyway. */
static int pick(const gt_job *jobs, int n, const char *state, int running)
{
    int first = -1;
    for (int k = 0; k < n; k++) {
        if (state[k] != 0)
            continue;
        if (first < 0)
            first = k;
        int a = jobs[k].after;
        if (a < 0 || a >= n || a == k || state[a] == 2)
            return k;
    }
    return running == 0 ? first : -1;
}

int gt_runner_run(const gt_runner_opts *opts, gt_job *jobs, int n, gt_err *err)
{
    int n_slots = opts->jobs > 0 ? opts->jobs : 1;
    slot *slots = calloc((size_t)n_slots, sizeof *slots);
    struct pollfd *pfd = calloc((size_t)n_slots * 2, sizeof *pfd);
    if (!slots || !pfd) {
        free(slots);
        free(pfd);
        return gt_err_set(err, "out of memory");
    }
    g_stop = 0;
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term, old_pipe;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigaction(SIGPIPE, &ign, &old_pipe);

    tally t = {0};
    /* 0 waiting, 1 running, 2 finished: a job starts once its "after" job
     * has finished, so a cell reuses its reference cell's cached outputs
     * instead of computing them again in parallel. */
    char *state = calloc((size_t)n + 1, 1);
    if (!state) {
        free(slots);
        free(pfd);
        return gt_err_set(err, "out of memory");
    }
    int started = 0, running = 0, rc = 0;
    while ((started < n || running > 0) && rc == 0) {
        /* Fill free slots; jobs without a spec are reported at once. */
        for (int i = 0; i < n_slots && started < n && !g_stop; i++) {
            if (slots[i].job)
                continue;
            int k = pick(jobs, n, state, running);
            if (k < 0)
                break; /* the rest wait for running jobs */
            gt_job *job = &jobs[k];
            state[k] = 1;
            started++;
            int st = job->spec ? start(opts, &slots[i], job) : 1;
            if (!job->spec) {
                memset(&slots[i], 0, sizeof slots[i]);
                slots[i].job = job;
                slots[i].fd_res = slots[i].fd_log = -1;
                slots[i].o.end = GT_END_NOT_RUN;
                slots[i].o.lines = cJSON_CreateArray();
                slots[i].o.log = calloc(1, 1);
                slots[i].o.worker_s = slots[i].o.hello_ms = -1;
                slots[i].o.started_at = unix_now();
                slots[i].t_start = mono();
            }
            if (st != 0) {
                if (!slots[i].o.log) {
                    rc = gt_err_set(err, "out of memory");
                    break;
                }
                state[k] = 2;
                if (finish(opts, &slots[i], &t, err) != 0)
                    rc = -1;
                i--; /* this slot is free again */
                continue;
            }
            running++;
        }
        if (rc)
            break;
        if (g_stop)
            break;
        progress(opts, &t, slots, n_slots, n - t.done);
        int np = 0;
        double now = mono(), wait_ms = 100;
        for (int i = 0; i < n_slots; i++) {
            slot *s = &slots[i];
            if (!s->job)
                continue;
            if (s->fd_res >= 0)
                pfd[np++] = (struct pollfd){.fd = s->fd_res, .events = POLLIN};
            if (s->fd_log >= 0)
                pfd[np++] = (struct pollfd){.fd = s->fd_log, .events = POLLIN};
            double left = (s->deadline - now) * 1e3;
            if (!s->killed && left < wait_ms)
                wait_ms = left < 0 ? 0 : left;
        }
        if (poll(pfd, (nfds_t)np, np ? (int)wait_ms + 1 : 10) < 0 && errno != EINTR) {
            rc = gt_err_set(err, "poll: %s", strerror(errno));
            break;
        }
        now = mono();
        for (int i = 0; i < n_slots; i++) {
            slot *s = &slots[i];
            if (!s->job)
                continue;
            for (int k = 0; k < np; k++) {
                if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
                    continue;
                if (pfd[k].fd == s->fd_res)
                    read_results(s);
                else if (pfd[k].fd == s->fd_log)
                    read_log(s);
            }
            if (!s->killed && now >= s->deadline) {
                kill(-s->pid, SIGKILL);
                kill(s->pid, SIGKILL);
                s->killed = true;
            }
            if (s->fd_res >= 0 || s->fd_log >= 0)
                continue;
            int status;
            pid_t r = waitpid(s->pid, &status, WNOHANG);
            if (r == 0)
                continue;
            if (r < 0) {
                s->o.end = GT_END_SPAWN;
                log_append(s, "waitpid failed\n", 15);
            } else if (s->killed) {
                s->o.end = GT_END_TIMEOUT;
            } else if (WIFSIGNALED(status)) {
                s->o.end = GT_END_SIGNALED;
                s->o.sig = WTERMSIG(status);
            } else {
                s->o.end = GT_END_EXITED;
                s->o.code = WEXITSTATUS(status);
            }
            running--;
            state[s->job - jobs] = 2;
            if (finish(opts, s, &t, err) != 0) {
                rc = -1;
                break;
            }
        }
    }
    if (opts->progress) /* before the abandoned callback's lines */
        fputs("\r\033[K", stderr);
    /* Interrupted or failed: kill what runs; those cells stay pending, and
     * the caller sees what they wrote (gt_runner_abandoned_fn). */
    for (int i = 0; i < n_slots; i++) {
        slot *s = &slots[i];
        if (!s->job)
            continue;
        if (s->pid > 0) {
            kill(-s->pid, SIGKILL);
            kill(s->pid, SIGKILL);
            int status = 0;
            pid_t r;
            while ((r = waitpid(s->pid, &status, 0)) < 0 && errno == EINTR)
                ;
            drain_results(s);
            if (r != s->pid) {
                s->o.end = GT_END_SPAWN; /* how it ended is unknown */
                log_append(s, "waitpid failed\n", 15);
            } else if (WIFEXITED(status)) {
                s->o.end = GT_END_EXITED;
                s->o.code = WEXITSTATUS(status);
            } else {
                s->o.end = GT_END_SIGNALED;
                s->o.sig = WTERMSIG(status);
            }
            s->o.finished_at = unix_now();
            s->o.wall_s = mono() - s->t_start;
            if (opts->abandoned)
                opts->abandoned(opts->user, s->job, &s->o);
        }
        release(s);
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGPIPE, &old_pipe, NULL);
    free(state);
    free(slots);
    free(pfd);
    if (rc)
        return -1;
    return g_stop ? 1 : 0;
}
