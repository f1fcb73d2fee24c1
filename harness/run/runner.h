/* runner.h: runs cells in child processes, N at a time.
 *
 * Each job is one `gauntlet worker` process (this binary re-executed from
 * /proc/self/exe) in its own process group, with the job's spec on stdin,
 * JSON result lines on fd 3, stdout+stderr captured as its log, an
 * address-space limit (RLIMIT_AS) and a wall-clock timeout after which the
 * whole group is SIGKILLed. The child also dies with the parent
 * (PR_SET_PDEATHSIG), so a killed harness leaves no stray workers.
 *
 * The runner judges nothing and writes nothing: when a child is reaped it
 * hands the outcome to the caller's done callback (which records it, in the
 * parent, one transaction per cell) and prints the line the callback returns.
 * SIGINT/SIGTERM stop the run: running children are killed and their cells
 * are not reported (they stay pending, to be resumed); a callback already in
 * progress completes first, since the handler only sets a flag. What such a
 * child had written on its result pipe is still read, and handed to the
 * abandoned callback (when set), so the caller can keep what a resumed cell
 * may reuse. */
#ifndef GT_RUNNER_H
#define GT_RUNNER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "gt/error.h"
#include "base.h"

typedef struct gt_job {
    const char *cell_id;
    const char *spec;  /* JSON text for the worker's stdin; NULL = not run (see done) */
    double timeout_s;
    int64_t memory_mb; /* 0 = no limit */
    int after;         /* index of a job that must finish first (-1: none), e.g. the
                          reference cell whose outputs this cell's suites reuse */
    void *user;
} gt_job;

typedef enum gt_end {
    GT_END_EXITED,   /* code */
    GT_END_SIGNALED, /* sig */
    GT_END_TIMEOUT,  /* killed by the runner at the deadline */
    GT_END_SPAWN,    /* could not start; log says why */
    GT_END_NOT_RUN,  /* the job had no spec */
} gt_end;

typedef struct gt_outcome {
    gt_end end;
    int code, sig;
    cJSON *lines;      /* array of the worker's JSON lines, in order */
    int bad_lines;     /* lines on fd 3 that were not JSON objects */
    char *log;         /* last ~16 KiB of stdout+stderr, NUL-terminated */
    double started_at; /* unix seconds */
    double finished_at;
    double wall_s;     /* fork to reap */
    double hello_ms;   /* fork to the worker's first line: process start cost */
    double worker_s;   /* the worker's own time ("done" line), or -1 */
} gt_outcome;

/* What the caller made of a finished job, for the progress output. */
typedef struct gt_report {
    gt_status status;
    char reason[512];
    double overhead_ms; /* the harness's share: process start + DB commit; <0 unknown */
    double commit_ms;
    double teardown_ms; /* after the worker's last line until it was reaped (library
                           destructors: GPU runtimes can take 100 ms here) */
} gt_report;

/* Returns 0, or -1 to stop the run (err filled: e.g. the database failed). */
typedef int (*gt_runner_done_fn)(void *user, const gt_job *job, const gt_outcome *o,
                                 gt_report *rep, gt_err *err);

/* A job the run stopped before it finished (interrupt, or the done callback
 * failed): its process group was killed and reaped and every complete line
 * it had written read first (an unterminated last line is dropped: the
 * child died writing it). o->end/code/sig say how the child ended:
 * GT_END_SIGNALED with SIGKILL when the runner's kill ended it, its own end
 * when it had already died, GT_END_SPAWN when it could not be reaped.
 * The job is not reported, so its cell stays pending. Returns nothing: the
 * run is stopping either way, so the callback says what went wrong itself. */
typedef void (*gt_runner_abandoned_fn)(void *user, const gt_job *job, const gt_outcome *o);

typedef struct gt_runner_opts {
    const char *self_exe;
    int jobs;           /* processes at once, >= 1 */
    bool progress;      /* redraw a progress line on stderr (a TTY) */
    bool quiet;         /* no per-cell lines */
    FILE *out;          /* per-cell lines */
    int total;          /* cells in the run (for "done/total"), >= n */
    int already_done;   /* cells finished before this invocation (resume) */
    gt_runner_done_fn done;
    gt_runner_abandoned_fn abandoned; /* may be NULL */
    void *user;
} gt_runner_opts;

/* 0 = all jobs ran, 1 = interrupted by SIGINT/SIGTERM, -1 = error. */
int gt_runner_run(const gt_runner_opts *opts, gt_job *jobs, int n, gt_err *err);

/* Whether SIGINT/SIGTERM arrived during the last gt_runner_run. */
bool gt_runner_interrupted(void);

#endif
