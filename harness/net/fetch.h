/* fetch.h: getting model artifacts onto this machine, verified by SHA-256.
 *
 * An artifact is named by its sha256 (and usually its size); URLs and
 * mirrors are only places it may be had. gt_fetch looks, in order:
 *   1. in the cache, <cache_dir>/<name> (re-verified; a wrong file there is
 *      deleted, since only verified files are ever renamed into the cache);
 *   2. in each mirror folder, <mirror>/<name>: a verified hit is returned
 *      in place, not copied (CI points this at a read-only ../shared/models);
 *   3. at each URL in turn, downloaded with libcurl into <name>.part beside
 *      the cache file and renamed to <name> only after the sha256 matches.
 *
 * Downloads survive a dropped connection: the .part file is kept and the
 * next attempt asks for the rest with an HTTP Range; when the server answers
 * 200 instead of 206 (range ignored) the part is restarted from zero.
 * Timeouts, dropped connections and 5xx answers are retried with exponential
 * backoff, a bounded number of times; 4xx answers (404, 403, ...) are not
 * retried. A finished file whose hash (or size) is wrong is deleted and the
 * error names both hashes. Two processes fetching the same name serialise on
 * a lock on the .part file, so they never write it at the same time.
 *
 * Sharded (split GGUF) models are fetched and verified one shard at a time
 * with gt_fetch_model_json. */
#ifndef GT_FETCH_H
#define GT_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "gt/error.h"

/* gt_fetch's failures: every one fills err. MISSING means "nobody has it"
 * (no URL and no mirror copy, or every URL answered 404/403/410): the
 * harness reports cells on it as "skip: artifact missing". */
#define GT_FETCH_ERROR (-1)
#define GT_FETCH_MISSING (-2)

typedef struct gt_fetch_req {
    const char *const *urls; /* tried in order; may be empty when a mirror has it */
    int n_urls;
    const char *sha256;     /* required: 64 hex digits (either case) */
    int64_t size;           /* expected bytes, or -1 when unknown */
    const char *name;       /* file name in the cache and mirrors; NULL = the
                               last path segment of urls[0] */
    const char *cache_dir;  /* NULL = $XDG_CACHE_HOME/gauntlet/models (or ~/.cache/...) */
    const char *mirror_dir; /* colon-separated folders; NULL = $GT_MODEL_MIRROR */
    int progress;           /* 1 = bar on stderr, 0 = silent, -1 = when stderr is a TTY */
    bool quiet;             /* no notes on stderr (retries, mirror misses) */

    /* Tuning, 0 = default. Tests set these small. */
    int attempts;           /* tries per URL (default 6: one + 5 retries) */
    double retry_delay_s;   /* first backoff delay, doubled each retry, capped
                               at 60 s (default 1) */
    long connect_timeout_s; /* default 30 */
    long low_speed_bytes;   /* abort below this many bytes/s ... (default 1024) */
    long low_speed_time_s;  /* ... for this long (default 60); covers slow headers too */
} gt_fetch_req;

/* Fetches one artifact; on success writes its local path to out_path and
 * returns 0. Else GT_FETCH_ERROR or GT_FETCH_MISSING with err filled. */
int gt_fetch(const gt_fetch_req *req, char *out_path, size_t cap, gt_err *err);

/* Fetches one model entry of a matrix or models file:
 *   {"url": U | "urls": [U, ...], "sha256": H, "size": N, "file": NAME}
 * or a split model
 *   {"shards": [{"url"|"urls", "sha256", "size", "file"}, ...]}
 * Other keys are ignored (a matrix entry has many). base supplies the cache,
 * mirror, progress and tuning settings; its urls/sha256/size/name are
 * ignored. On success *paths receives the local path of each file (shards
 * in order; free with gt_fetch_paths_free) and *n_paths their count. */
int gt_fetch_model_json(const cJSON *entry, const gt_fetch_req *base, char ***paths,
                        int *n_paths, gt_err *err);
void gt_fetch_paths_free(char **paths, int n);

/* Creates dir and its parents (mkdir -p); 0, or -1 with err filled. */
int gt_fetch_mkdirs(const char *dir, gt_err *err);

/* The default cache folder for models (no trailing slash). */
void gt_fetch_default_cache(char *out, size_t cap);

#endif
