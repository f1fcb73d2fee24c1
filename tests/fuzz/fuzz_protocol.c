/* fuzz_protocol.c: libFuzzer target for the parent's side of the worker
 * protocol: the JSON lines a `gauntlet worker` writes on fd 3, as the
 * qualify parent consumes them.
 *
 * A worker is untrusted in the sense that matters here: it may be crashing,
 * half-written, from another version, or a suite with a bug, and whatever it
 * wrote must become a recorded status, never a crash of the parent (which
 * holds the database and every other cell). The path run is the parent's
 * own: harness/run/worker_lines.c reassembling lines from chunked reads and
 * parsing each (a non-object counts as a bad line), then gt_verdict_judge
 * (harness/run/verdict.c) and the cell's transaction gt_db_cell_record
 * (harness/store/db_record.c). Only the split of the lines by "t" into results,
 * metrics and devices is a copy, of cmd_qualify.c on_done (static there).
 *
 * Input: byte 0 picks how the worker ended, whether the cell was expected
 * to xfail and the size of the reads; the rest is what it wrote. "ref" lines are judged but not
 * recorded: recording one moves and unlinks the file it names, and a fuzzer
 * must not delete files. The database is a scratch file in $TMPDIR with
 * synchronous=OFF, created once per process. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "db.h"
#include "runner.h"
#include "verdict.h"
#include "worker_lines.h"

#define CELL "m/f32/reference/default"

static gt_db *db;
static int64_t run_id;
static char db_path[4096];

static void drop_db(void)
{
    gt_db_close(db);
    unlink(db_path);
    char side[4200];
    snprintf(side, sizeof side, "%s-wal", db_path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", db_path);
    unlink(side);
}

static void open_db(void)
{
    if (db)
        return;
    const char *tmp = getenv("TMPDIR");
    snprintf(db_path, sizeof db_path, "%s/gt-fuzz-protocol-%d.sqlite", tmp ? tmp : "/tmp",
             (int)getpid());
    unlink(db_path);
    gt_err err;
    gt_db_run_new r = {.run_key = "fuzz", .matrix_name = "fuzz", .matrix_sha256 = "0",
                       .matrix_json = "{}", .matrix_path = "fuzz.json", .tier = "ci",
                       .n_cells = 1};
    gt_db_cell_new c = {.cell_id = CELL, .model = "m", .quant = "f32", .backend = "reference",
                        .driver = "default", .idx = 0, .required = true, .expected = "pass"};
    if (gt_db_open(db_path, false, &db, &err) != 0 ||
        gt_db_exec(db, "PRAGMA synchronous=OFF", &err) != 0 ||
        gt_db_run_create(db, &r, &run_id, &err) != 0 || gt_db_cells_add(db, run_id, &c, 1, &err)) {
        fprintf(stderr, "fuzz_protocol: cannot set up %s: %s\n", db_path, err.msg);
        abort();
    }
    atexit(drop_db);
}

/* gt_wlines_fn: the parent's own line parser (harness/run/worker_lines.c). */
static void take_line(void *user, char *text) { gt_wlines_take(user, text); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 256 * 1024)
        return 0;
    open_db();
    static const gt_end ends[] = {GT_END_EXITED, GT_END_EXITED, GT_END_SIGNALED, GT_END_TIMEOUT};
    gt_outcome o = {.end = ends[data[0] & 3], .code = (data[0] >> 3) & 1, .sig = 11,
                    .lines = cJSON_CreateArray(), .worker_s = -1, .hello_ms = 1};
    gt_status expected = (data[0] & 4) ? GT_ST_XFAIL : GT_ST_PASS;
    /* The rest is the fd 3 stream; the log is the same bytes (a log is
     * arbitrary too, and the verdict quotes its tail). */
    char *text = malloc(size);
    if (!text || !o.lines) {
        free(text);
        cJSON_Delete(o.lines);
        return 0;
    }
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    o.log = strdup(text);
    /* The stream arrives the way the runner's reads hand it over: in chunks
     * whose size byte 0 picks (1 byte up to all of it), so a line split
     * across reads takes the same path as in `gauntlet qualify`. */
    static const size_t chunks[] = {1, 7, 4096, SIZE_MAX};
    size_t chunk = chunks[(data[0] >> 4) & 3];
    gt_wlines w = {0};
    for (size_t at = 0; at < size - 1;) {
        size_t n = size - 1 - at < chunk ? size - 1 - at : chunk;
        gt_wlines_feed(&w, (const char *)data + 1 + at, n, take_line, &o);
        at += n;
    }
    gt_wlines_end(&w, take_line, &o);
    gt_wlines_free(&w);

    gt_status raw, final;
    char reason[2048];
    gt_verdict_judge(&o, 60, expected, "documented", &raw, &final, reason, sizeof reason);
    if (strlen(reason) >= sizeof reason)
        __builtin_trap();

    cJSON *results = cJSON_CreateArray(), *metrics = cJSON_CreateArray();
    cJSON *devices = cJSON_CreateArray();
    const cJSON *l;
    cJSON_ArrayForEach(l, o.lines)
    {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(l, "t");
        const char *ty = cJSON_IsString(t) ? t->valuestring : "";
        cJSON *dst = !strcmp(ty, "result")   ? results
                     : !strcmp(ty, "metric") ? metrics
                     : !strcmp(ty, "device") ? devices
                                             : NULL;
        if (dst)
            cJSON_AddItemReferenceToArray(dst, (cJSON *)l);
    }
    bool complete = o.end == GT_END_EXITED;
    gt_db_record rec = {
        .cell_id = CELL, .status = gt_status_name(final), .raw_status = gt_status_name(raw),
        .reason = reason, .log = o.log, .started_at = 1, .finished_at = 2, .duration_s = 1,
        .worker_s = o.worker_s, .overhead_ms = -1, .part_id = 0,
        .results = complete ? results : NULL, .metrics = complete ? metrics : NULL,
        .devices = devices,
    };
    gt_err err;
    double ms;
    if (gt_db_cell_record(db, run_id, &rec, &ms, &err) != 0) {
        /* The schema takes any worker's word (db_record.c stores out-of-
         * schema values as a fallback); a failed transaction here would
         * stop a whole qualification run. */
        fprintf(stderr, "fuzz_protocol: recording failed: %s\n", err.msg);
        __builtin_trap();
    }
    cJSON_Delete(results);
    cJSON_Delete(metrics);
    cJSON_Delete(devices);
    cJSON_Delete(o.lines);
    free(o.log);
    free(text);
    return 0;
}
