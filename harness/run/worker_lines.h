/* worker_lines.h: the parent's reader of a worker's fd-3 stream.
 *
 * A worker writes one JSON object per '\n'-terminated line on fd 3 (the
 * protocol: worker.c). The parent reads the pipe in whatever chunks poll()
 * hands it, so a line can arrive in pieces; gt_wlines_feed reassembles
 * lines and gt_wlines_take parses one into the cell's gt_outcome. The
 * worker is untrusted here (crashing, half-written, another version): any
 * bytes at all become lines held or lines counted bad, never a crash of
 * the parent. Kept apart from runner.c's process handling so the protocol
 * fuzzer (tests/fuzz/fuzz_protocol.c) runs this very code. */
#ifndef GT_WORKER_LINES_H
#define GT_WORKER_LINES_H

#include <stddef.h>

#include "runner.h"

/* A partial line between reads. Zero-initialise. */
typedef struct gt_wlines {
    char *buf;
    size_t len, cap;
} gt_wlines;

typedef void (*gt_wlines_fn)(void *user, char *line);

/* Calls fn with each complete line in data (without its '\n', NUL-
 * terminated; an empty line too); keeps an unfinished one for the next
 * call. Out of memory drops the byte, so the line fails to parse and is
 * counted bad rather than lost silently. */
void gt_wlines_feed(gt_wlines *w, const char *data, size_t n, gt_wlines_fn fn, void *user);
/* End of the stream: an unterminated last line is still a line. */
void gt_wlines_end(gt_wlines *w, gt_wlines_fn fn, void *user);
void gt_wlines_free(gt_wlines *w);

/* Parses one line into o: a JSON object is appended to o->lines (and a
 * "done" line's worker_s read); anything else counts in o->bad_lines.
 * Returns how many lines o holds now (1: this was the first), or -1 for a
 * bad line. */
int gt_wlines_take(gt_outcome *o, const char *text);

#endif
