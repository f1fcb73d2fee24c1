/* server_proc.h: a server process a cell starts, watches and stops.
 *
 * The worker of an "http" cell (worker.c) starts the server under test
 * (e.g. `gauntlet serve`) with gt_server_proc_start: fork/exec in its own
 * process group, stdin from /dev/null, no descriptor of the worker's
 * inherited (in particular not the result pipe), and PR_SET_PDEATHSIG
 * SIGTERM, so a worker that crashes or is killed at its deadline never
 * leaves a server behind. The server's stdout and stderr go through a pipe
 * that a small thread copies into the worker's stderr (the cell's log, live)
 * while keeping the last few KiB, so a message can quote the server's last
 * lines. gt_server_proc_stop sends SIGTERM to the group, waits up to a grace
 * period, then SIGKILLs it, and says how the server ended; whatever is left
 * in its group after that (a wrapper script's background server, which the
 * death signal does not cover) gets SIGTERM, then SIGKILL a second later. */
#ifndef GT_SERVER_PROC_H
#define GT_SERVER_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "gt/error.h"

typedef struct gt_server_proc gt_server_proc;

/* Starts argv[0] (looked up in PATH when it has no '/'). An exec failure
 * shows as an exit with code 127 and the reason in the output. */
int gt_server_proc_start(char *const argv[], gt_server_proc **out, gt_err *err);

pid_t gt_server_proc_pid(const gt_server_proc *p);

/* Whether the server has exited (reaps it without blocking); when it has,
 * how[] describes it ("exited with code 1", "was killed by SIGSEGV (...)"). */
bool gt_server_proc_exited(gt_server_proc *p, char *how, size_t cap);

/* Its exit code once it has exited by itself or been stopped (WEXITSTATUS),
 * -1 while it runs or when a signal ended it. */
int gt_server_proc_exit_code(gt_server_proc *p);

/* The last n lines (at most 16) of its output, joined by " | ". */
void gt_server_proc_tail(gt_server_proc *p, int n, char *out, size_t cap);

/* Stops it (SIGTERM to its group, up to grace_s, then SIGKILL) unless it
 * has exited already, and collects the rest of its output (the tail is
 * complete afterwards). how[] says how it ended; returns 0 when it exited
 * with code 0 after our SIGTERM, 1 otherwise (nonzero code, a signal,
 * SIGKILL needed, or it had exited before the stop). */
int gt_server_proc_stop(gt_server_proc *p, double grace_s, char *how, size_t cap);

/* Stops it (no grace) if that was not done, and frees p. NULL is fine. */
void gt_server_proc_free(gt_server_proc *p);

/* A TCP port on 127.0.0.1 that is free now (the kernel's pick for port 0). */
int gt_server_proc_free_port(gt_err *err);

#endif
