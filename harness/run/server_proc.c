/* server_proc.c: a server process a cell starts, watches and stops (see
 * server_proc.h).
 *
 * Output: one pipe for the server's stdout and stderr; a thread polls it
 * together with a wake-up pipe, copies every chunk to the worker's stderr
 * with write(2) (no stdio locks shared with the suites) and keeps the tail
 * in a ring under a mutex. At stop, once the server is reaped, the thread is
 * woken, drains what is left without blocking and ends, so a stray
 * grandchild holding the pipe cannot hang the worker.
 *
 * The fork happens before the thread exists, so the child of a
 * single-threaded worker only runs async-signal-safe code until exec. The
 * death signal is tied to the forking thread, which is the worker's main
 * thread: it lives until the worker exits. */
#include "server_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "verdict.h"

#define TAIL_CAP 4096

struct gt_server_proc {
    pid_t pid;
    bool reaped;
    int status;          /* waitpid status once reaped */
    int out_fd, wake[2]; /* read end of the output pipe; wake-up pipe */
    pthread_t thread;
    bool have_thread, stopped;
    pthread_mutex_t mu;
    char tail[TAIL_CAP]; /* ring of the last output bytes */
    size_t tail_len, tail_pos;
};

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void keep(gt_server_proc *p, const char *buf, size_t n)
{
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < n; i++) {
        p->tail[p->tail_pos] = buf[i];
        p->tail_pos = (p->tail_pos + 1) % TAIL_CAP;
    }
    p->tail_len = p->tail_len + n > TAIL_CAP ? TAIL_CAP : p->tail_len + n;
    pthread_mutex_unlock(&p->mu);
}

/* Copies one chunk: 1 copied, 0 nothing now (EAGAIN, EINTR), -1 EOF or error. */
static int pump(gt_server_proc *p)
{
    char buf[8192];
    ssize_t n = read(p->out_fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 0;
    if (n <= 0)
        return -1;
    for (ssize_t off = 0; off < n;) {
        ssize_t w = write(2, buf + off, (size_t)(n - off));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break; /* the log is gone; still keep the tail */
        off += w;
    }
    keep(p, buf, (size_t)n);
    return 1;
}

static void *copier(void *arg)
{
    gt_server_proc *p = arg;
    for (;;) {
        struct pollfd fds[2] = {{.fd = p->out_fd, .events = POLLIN},
                                {.fd = p->wake[0], .events = POLLIN}};
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (fds[1].revents) { /* stopping: take what is buffered, then end */
            fcntl(p->out_fd, F_SETFL, O_NONBLOCK);
            while (pump(p) == 1)
                ;
            break;
        }
        if (fds[0].revents && pump(p) < 0)
            break;
    }
    return NULL;
}

/* In the child, until exec: only async-signal-safe calls. */
static void child(char *const argv[], int out_w, pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) /* the worker died before prctl */
        _exit(126);
    setpgid(0, 0);
    int null = open("/dev/null", O_RDONLY);
    if (null < 0 || dup2(null, 0) < 0 || dup2(out_w, 1) < 0 || dup2(out_w, 2) < 0)
        _exit(125);
    closefrom(3);
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigaction(SIGINT, &dfl, NULL);
    sigaction(SIGTERM, &dfl, NULL);
    sigaction(SIGPIPE, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execvp(argv[0], argv);
    const char *why = strerror(errno);
    static const char pre[] = "cannot execute ";
    if (write(2, pre, sizeof pre - 1) < 0 || write(2, argv[0], strlen(argv[0])) < 0 ||
        write(2, ": ", 2) < 0 || write(2, why, strlen(why)) < 0 || write(2, "\n", 1) < 0)
        _exit(127);
    _exit(127);
}

int gt_server_proc_start(char *const argv[], gt_server_proc **out, gt_err *err)
{
    *out = NULL;
    gt_server_proc *p = calloc(1, sizeof *p);
    if (!p)
        return gt_err_set(err, "out of memory");
    p->out_fd = p->wake[0] = p->wake[1] = -1;
    pthread_mutex_init(&p->mu, NULL);
    int op[2];
    if (pipe2(op, O_CLOEXEC) != 0) {
        free(p);
        return gt_err_set(err, "pipe: %s", strerror(errno));
    }
    if (pipe2(p->wake, O_CLOEXEC) != 0) {
        close(op[0]), close(op[1]);
        free(p);
        return gt_err_set(err, "pipe: %s", strerror(errno));
    }
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        child(argv, op[1], parent);
    close(op[1]);
    if (pid < 0) {
        int e = errno;
        close(op[0]), close(p->wake[0]), close(p->wake[1]);
        free(p);
        return gt_err_set(err, "fork: %s", strerror(e));
    }
    setpgid(pid, pid); /* also in the child: whichever runs first */
    p->pid = pid;
    p->out_fd = op[0];
    if (pthread_create(&p->thread, NULL, copier, p) == 0)
        p->have_thread = true;
    else /* no copy of its output: the server then blocks on a full pipe, so stop it */
        fprintf(stderr, "server_proc: cannot start the output thread\n");
    if (!p->have_thread) {
        gt_server_proc_free(p);
        return gt_err_set(err, "cannot start a thread for the server's output");
    }
    *out = p;
    return 0;
}

pid_t gt_server_proc_pid(const gt_server_proc *p) { return p->pid; }

static void describe(int status, char *how, size_t cap)
{
    if (WIFEXITED(status)) {
        snprintf(how, cap, "exited with code %d", WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
        char sig[96];
        gt_signal_describe(WTERMSIG(status), sig, sizeof sig);
        snprintf(how, cap, "was killed by %s", sig);
    } else {
        snprintf(how, cap, "ended with status 0x%x", status);
    }
}

static bool try_reap(gt_server_proc *p)
{
    if (p->reaped)
        return true;
    int st;
    pid_t r = waitpid(p->pid, &st, WNOHANG);
    if (r == p->pid || (r < 0 && errno == ECHILD)) {
        p->reaped = true;
        p->status = r == p->pid ? st : 0;
    }
    return p->reaped;
}

bool gt_server_proc_exited(gt_server_proc *p, char *how, size_t cap)
{
    if (!try_reap(p))
        return false;
    if (how)
        describe(p->status, how, cap);
    return true;
}

int gt_server_proc_exit_code(gt_server_proc *p)
{
    if (!p->stopped && !try_reap(p))
        return -1;
    return WIFEXITED(p->status) ? WEXITSTATUS(p->status) : -1;
}

void gt_server_proc_tail(gt_server_proc *p, int n, char *out, size_t cap)
{
    char text[TAIL_CAP + 1];
    pthread_mutex_lock(&p->mu);
    size_t start = (p->tail_pos + TAIL_CAP - p->tail_len) % TAIL_CAP;
    for (size_t i = 0; i < p->tail_len; i++)
        text[i] = p->tail[(start + i) % TAIL_CAP];
    text[p->tail_len] = '\0';
    pthread_mutex_unlock(&p->mu);
    gt_log_tail(text, n, out, cap);
}

/* Members of the server's group still alive after its leader was reaped
 * (what a wrapper script started in the background): SIGTERM, up to 1 s,
 * SIGKILL. The group id stays reserved while it has members, so this never
 * reaches another group; an empty group is ESRCH. */
static void sweep_group(gt_server_proc *p)
{
    if (kill(-p->pid, 0) != 0)
        return;
    fprintf(stderr, "server_proc: processes of the server's group %d outlived it; stopping them\n",
            (int)p->pid);
    kill(-p->pid, SIGTERM);
    double t_end = mono() + 1.0;
    while (kill(-p->pid, 0) == 0 && mono() < t_end)
        usleep(20000);
    kill(-p->pid, SIGKILL);
}

int gt_server_proc_stop(gt_server_proc *p, double grace_s, char *how, size_t cap)
{
    int rc = 1;
    if (p->stopped) {
        snprintf(how, cap, "was stopped already");
    } else if (try_reap(p)) {
        char d[128];
        describe(p->status, d, sizeof d);
        snprintf(how, cap, "had %s before it was stopped", d);
    } else {
        kill(-p->pid, SIGTERM);
        kill(p->pid, SIGTERM);
        double t_end = mono() + grace_s;
        while (!try_reap(p) && mono() < t_end)
            usleep(20000);
        bool killed = false;
        if (!p->reaped) {
            kill(-p->pid, SIGKILL);
            kill(p->pid, SIGKILL);
            int st = 0;
            while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR)
                ;
            p->reaped = true;
            p->status = st;
            killed = true;
        }
        char d[128];
        describe(p->status, d, sizeof d);
        if (killed)
            snprintf(how, cap, "did not exit within %.0f s of SIGTERM; %s", grace_s, d);
        else
            snprintf(how, cap, "%s after SIGTERM", d);
        rc = !killed && WIFEXITED(p->status) && WEXITSTATUS(p->status) == 0 ? 0 : 1;
    }
    if (!p->stopped)
        sweep_group(p);
    if (p->have_thread) {
        if (write(p->wake[1], "x", 1) < 0)
            fprintf(stderr, "server_proc: cannot wake the output thread\n");
        pthread_join(p->thread, NULL);
        p->have_thread = false;
    }
    p->stopped = true;
    return rc;
}

void gt_server_proc_free(gt_server_proc *p)
{
    if (!p)
        return;
    if (!p->stopped) {
        char how[160];
        gt_server_proc_stop(p, 0, how, sizeof how);
    }
    close(p->out_fd);
    close(p->wake[0]);
    close(p->wake[1]);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int gt_server_proc_free_port(gt_err *err)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return gt_err_set(err, "socket: %s", strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        int e = errno;
        close(fd);
        return gt_err_set(err, "cannot find a free port on 127.0.0.1: %s", strerror(e));
    }
    close(fd);
    return ntohs(a.sin_port);
}
