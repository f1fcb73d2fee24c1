/* fetch.c: artifact download with libcurl: cache, mirrors, resume, retry.
 *
 * See fetch.h for the contract. Design choices:
 * - The running SHA-256 is kept across attempts of one fetch, so a resumed
 *   download hashes each byte once; a .part left by an earlier process is
 *   hashed once up front.
 * - Whether a server honoured the Range is decided at the first body byte
 *   (status 206 and a Content-Range starting where the part ends); a 200
 *   truncates the part and starts over, a 206 at the wrong offset discards
 *   the part. Nothing is appended that we cannot account for.
 * - Only the final rename puts a file in the cache, and only after its hash
 *   matched, so a crash at any point leaves either nothing or a .part. */
#include "fetch.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "base.h"

#define DEFAULT_ATTEMPTS 6
#define MAX_DELAY_S 60.0

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

void gt_fetch_default_cache(char *out, size_t cap)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (xdg && *xdg)
        snprintf(out, cap, "%s/gauntlet/models", xdg);
    else
        snprintf(out, cap, "%s/.cache/gauntlet/models", home && *home ? home : "/tmp");
}

int gt_fetch_mkdirs(const char *dir, gt_err *err)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return gt_err_set(err, "cannot create %s: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return gt_err_set(err, "cannot create %s: %s", buf, strerror(errno));
    return 0;
}

static bool valid_sha(const char *s)
{
    if (!s || strlen(s) != 64)
        return false;
    for (int i = 0; i < 64; i++)
        if (!strchr("0123456789abcdefABCDEF", s[i]))
            return false;
    return true;
}

/* The last path segment of a URL, without query or fragment. */
static int name_from_url(const char *url, char *out, size_t cap)
{
    const char *end = url + strcspn(url, "?#");
    const char *start = end;
    while (start > url && start[-1] != '/')
        start--;
    size_t n = (size_t)(end - start);
    if (n == 0 || n >= cap)
        return -1;
    memcpy(out, start, n);
    out[n] = '\0';
    return 0;
}

static bool file_exists(const char *path, uint64_t *size)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return false;
    if (size)
        *size = (uint64_t)st.st_size;
    return true;
}

/* 0 = the file is the artifact, 1 = it is not (got filled when hashed),
 * -1 = it could not be read. */
static int verify_file(const char *path, const gt_fetch_req *r, char got[65], gt_err *err)
{
    uint64_t size = 0;
    got[0] = '\0';
    if (!file_exists(path, &size))
        return gt_err_set(err, "%s is not a regular file", path);
    if (r->size >= 0 && size != (uint64_t)r->size) {
        snprintf(got, 65, "(size %" PRIu64 ", expected %" PRId64 ")", size, r->size);
        return 1;
    }
    if (gt_sha256_file(path, got, NULL, err) != 0)
        return -1;
    return strcasecmp(got, r->sha256) == 0 ? 0 : 1;
}

static void note(const gt_fetch_req *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(const gt_fetch_req *r, const char *fmt, ...)
{
    if (r->quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gauntlet fetch: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

static void sleep_s(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Looks for name in each mirror folder; a verified hit goes to out. */
static bool try_mirrors(const gt_fetch_req *r, const char *name, char *out, size_t cap)
{
    const char *list = r->mirror_dir ? r->mirror_dir : getenv("GT_MODEL_MIRROR");
    if (!list || !*list)
        return false;
    char *copy = strdup(list), *save = NULL;
    bool found = false;
    for (char *dir = strtok_r(copy, ":", &save); dir && !found; dir = strtok_r(NULL, ":", &save)) {
        char path[PATH_MAX], got[65];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        if (!file_exists(path, NULL))
            continue;
        gt_err e = {{0}};
        int v = verify_file(path, r, got, &e);
        if (v == 0) {
            snprintf(out, cap, "%s", path);
            found = true;
        } else if (v == 1) {
            note(r, "mirror copy %s is not the artifact: sha256 %s, expected %s; ignored", path,
                 got, r->sha256);
        } else {
            note(r, "mirror copy %s: %s; ignored", path, e.msg);
        }
    }
    free(copy);
    return found;
}

/* ---- one download ----------------------------------------------------- */

typedef struct part {
    int fd;
    uint64_t len;   /* bytes in the file, all of them hashed into sha */
    gt_sha256 sha;
} part;

typedef struct xfer {
    part *p;
    const gt_fetch_req *r;
    const char *name;
    CURL *curl;
    uint64_t start;       /* p->len when this attempt began (the Range asked for) */
    bool checked;         /* response examined at the first body byte */
    bool bad_range;       /* 206 at an offset we did not ask for */
    bool io_error;
    char io_msg[256];
    int64_t range_start;  /* from Content-Range, -1 when absent */
    bool bar;
    double last_bar;
    double t0;
} xfer;

static size_t on_header(char *buf, size_t size, size_t n, void *ud)
{
    xfer *x = ud;
    size_t len = size * n;
    if (len >= 5 && strncmp(buf, "HTTP/", 5) == 0)
        x->range_start = -1; /* a new response (after a redirect) */
    else if (len > 14 && strncasecmp(buf, "Content-Range:", 14) == 0) {
        const char *p = buf + 14;
        while (*p == ' ' || *p == '\t')
            p++;
        unsigned long long a;
        if (strncasecmp(p, "bytes", 5) == 0 && sscanf(p + 5, " %llu-", &a) == 1)
            x->range_start = (int64_t)a;
    }
    return len;
}

static int truncate_part(part *p)
{
    if (ftruncate(p->fd, 0) != 0)
        return -1;
    p->len = 0;
    gt_sha256_init(&p->sha);
    return 0;
}

static size_t on_body(char *buf, size_t size, size_t n, void *ud)
{
    xfer *x = ud;
    size_t len = size * n;
    if (!x->checked) {
        x->checked = true;
        long code = 0;
        curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &code);
        if (x->start > 0 && code == 200) {
            /* The server ignored the Range: what comes is the whole file. */
            note(x->r, "%s: server ignored the range request; restarting from 0", x->name);
            if (truncate_part(x->p) != 0) {
                x->io_error = true;
                snprintf(x->io_msg, sizeof x->io_msg, "truncate: %s", strerror(errno));
                return 0;
            }
            x->start = 0;
        } else if (x->start > 0 && code == 206 && x->range_start != (int64_t)x->start) {
            x->bad_range = true;
            return 0;
        }
    }
    const char *p = buf;
    size_t left = len;
    while (left > 0) {
        ssize_t w = pwrite(x->p->fd, p, left, (off_t)x->p->len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            x->io_error = true;
            snprintf(x->io_msg, sizeof x->io_msg, "write: %s", strerror(errno));
            return 0;
        }
        gt_sha256_update(&x->p->sha, p, (size_t)w);
        x->p->len += (uint64_t)w;
        p += w;
        left -= (size_t)w;
    }
    return len;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)ultotal;
    (void)ulnow;
    xfer *x = ud;
    if (!x->bar)
        return 0;
    double now = mono_now();
    if (now - x->last_bar < 0.2)
        return 0;
    x->last_bar = now;
    double total = x->r->size >= 0 ? (double)x->r->size
                   : dltotal > 0   ? (double)(x->start + (uint64_t)dltotal)
                                   : 0;
    double have = (double)x->p->len;
    double rate = (double)dlnow / (now - x->t0 > 1e-3 ? now - x->t0 : 1e-3);
    const double mib = 1024.0 * 1024.0;
    if (total > 0) {
        int pct = (int)(100.0 * have / total);
        int fill = pct * 30 / 100;
        fprintf(stderr, "\r%-28.28s [%-30.*s] %3d%% %.1f/%.1f MiB %.1f MiB/s ", x->name, fill,
                "##############################", pct, have / mib, total / mib, rate / mib);
    } else {
        fprintf(stderr, "\r%-28.28s %.1f MiB %.1f MiB/s ", x->name, have / mib, rate / mib);
    }
    return 0;
}

/* UNREACHABLE (the host does not resolve, or refuses the connection) is
 * not retried: on a machine without a route there, backoff only delays the
 * answer. A URL that only ever gave it (or MISSING) counts towards "nobody
 * has it". Timeouts, dropped transfers and 5xx are RETRY. */
typedef enum outcome { OK, RETRY, UNREACHABLE, RESTART, MISSING, FATAL } outcome;

/* One HTTP attempt; fills why for anything but OK. */
static outcome attempt(CURL *c, const char *url, part *p, const gt_fetch_req *r, const char *name,
                       bool bar, char *why, size_t cap)
{
    xfer x = {.p = p, .r = r, .name = name, .curl = c, .start = p->len, .range_start = -1,
              .bar = bar, .t0 = mono_now()};
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "gauntlet-fetch/" GT_VERSION);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, r->connect_timeout_s > 0 ? r->connect_timeout_s : 30L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, r->low_speed_bytes > 0 ? r->low_speed_bytes : 1024L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, r->low_speed_time_s > 0 ? r->low_speed_time_s : 60L);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &x);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &x);
    /* CURLOPT_RANGE rather than RESUME_FROM: curl itself fails a resume
     * answered with 200, and we would rather restart than give up. */
    char range[32];
    if (p->len > 0) {
        snprintf(range, sizeof range, "%" PRIu64 "-", p->len);
        curl_easy_setopt(c, CURLOPT_RANGE, range);
    }
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);

    CURLcode rc = curl_easy_perform(c);
    if (bar && x.last_bar > 0) { /* the bar's last state, then its own line ends */
        x.last_bar = 0;
        on_progress(&x, 0, (curl_off_t)(p->len - x.start), 0, 0);
        fprintf(stderr, "\n");
    }
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    const char *detail = errbuf[0] ? errbuf : curl_easy_strerror(rc);

    if (x.io_error) {
        snprintf(why, cap, "writing the .part file: %s", x.io_msg);
        return FATAL;
    }
    if (x.bad_range) {
        snprintf(why, cap, "%s answered a range from byte %" PRId64 ", asked for %" PRIu64, url,
                 x.range_start, x.start);
        return RESTART;
    }
    switch (rc) {
    case CURLE_OK:
        break;
    case CURLE_HTTP_RETURNED_ERROR:
        if (code == 416) {
            snprintf(why, cap, "%s: HTTP 416 for a resume from byte %" PRIu64, url, x.start);
            return RESTART;
        }
        if (code >= 500 || code == 408 || code == 429) {
            snprintf(why, cap, "%s: HTTP %ld", url, code);
            return RETRY;
        }
        snprintf(why, cap, "%s: HTTP %ld%s (not retried)", url, code,
                 code == 404 ? " not found" : code == 403 ? " forbidden" : code == 410 ? " gone" : "");
        return code == 404 || code == 403 || code == 410 ? MISSING : FATAL;
    case CURLE_OPERATION_TIMEDOUT:
        snprintf(why, cap, "%s: timed out (%s)", url, detail);
        return RETRY;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
        snprintf(why, cap, "%s: %s (not retried)", url, detail);
        return UNREACHABLE;
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
        snprintf(why, cap, "%s: %s (after %" PRIu64 " bytes)", url, detail, p->len);
        return RETRY;
    case CURLE_RANGE_ERROR:
    case CURLE_BAD_DOWNLOAD_RESUME:
        snprintf(why, cap, "%s: cannot resume: %s", url, detail);
        return RESTART;
    default:
        snprintf(why, cap, "%s: %s", url, detail);
        return FATAL;
    }
    if (code != 0 && code != 200 && code != 206) {
        snprintf(why, cap, "%s: unexpected HTTP %ld", url, code);
        return FATAL;
    }
    if (r->size >= 0 && p->len < (uint64_t)r->size) {
        snprintf(why, cap, "%s: connection ended after %" PRIu64 " of %" PRId64 " bytes", url,
                 p->len, r->size);
        return RETRY;
    }
    if (r->size >= 0 && p->len > (uint64_t)r->size) {
        snprintf(why, cap, "%s: %" PRIu64 " bytes received, expected %" PRId64, url, p->len,
                 r->size);
        return RESTART;
    }
    return OK;
}

/* Opens and locks <final>.part; re-opens when another process replaced it
 * while we waited for the lock. The existing contents are hashed. */
static int open_part(const char *path, part *p, gt_err *err)
{
    for (int tries = 0; tries < 8; tries++) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            return gt_err_set(err, "cannot open %s: %s", path, strerror(errno));
        if (flock(fd, LOCK_EX) != 0) {
            close(fd);
            return gt_err_set(err, "cannot lock %s: %s", path, strerror(errno));
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino &&
            a.st_dev == b.st_dev) {
            p->fd = fd;
            p->len = 0;
            gt_sha256_init(&p->sha);
            static __thread uint8_t buf[1 << 16];
            ssize_t n;
            while ((n = pread(fd, buf, sizeof buf, (off_t)p->len)) > 0) {
                gt_sha256_update(&p->sha, buf, (size_t)n);
                p->len += (uint64_t)n;
            }
            if (n < 0) {
                close(fd);
                return gt_err_set(err, "cannot read %s: %s", path, strerror(errno));
            }
            return 0;
        }
        close(fd); /* unlinked or renamed under us: take the new one */
    }
    return gt_err_set(err, "cannot get a stable lock on %s", path);
}

/* Downloads into the cache; returns 0, GT_FETCH_MISSING or GT_FETCH_ERROR. */
static int download(const gt_fetch_req *r, const char *name, const char *final, char *out,
                    size_t cap, gt_err *err)
{
    char part_path[PATH_MAX + 8];
    snprintf(part_path, sizeof part_path, "%s.part", final);
    part p;
    if (open_part(part_path, &p, err) != 0)
        return GT_FETCH_ERROR;
    char got[65];
    if (file_exists(final, NULL)) { /* another process finished while we waited */
        int v = verify_file(final, r, got, err);
        if (v == 0) {
            close(p.fd);
            snprintf(out, cap, "%s", final);
            return 0;
        }
        unlink(final);
    }
    if (r->size >= 0 && p.len > (uint64_t)r->size)
        truncate_part(&p);

    const int attempts = r->attempts > 0 ? r->attempts : DEFAULT_ATTEMPTS;
    const double delay0 = r->retry_delay_s > 0 ? r->retry_delay_s : 1.0;
    const bool bar = r->progress > 0 || (r->progress < 0 && isatty(2));
    CURL *c = curl_easy_init();
    if (!c) {
        close(p.fd);
        return gt_err_set(err, "curl_easy_init failed"), GT_FETCH_ERROR;
    }
    int rc = GT_FETCH_ERROR;
    char why[1024] = "no URL to download from";
    bool all_missing = true, done = false;
    for (int u = 0; u < r->n_urls && !done; u++) {
        double delay = delay0;
        outcome last = OK;
        for (int a = 1; a <= attempts; a++) {
            if (r->size >= 0 && p.len == (uint64_t)r->size)
                last = OK; /* a complete .part from an earlier run: just verify it */
            else
                last = attempt(c, r->urls[u], &p, r, name, bar, why, sizeof why);
            if (last == OK) {
                done = true;
                gt_sha256 s = p.sha; /* final consumes the state */
                gt_sha256_final_hex(&s, got);
                if (strcasecmp(got, r->sha256) != 0) {
                    unlink(part_path);
                    snprintf(why, sizeof why,
                             "sha256 mismatch for %s from %s: expected %s, got %s (%" PRIu64
                             " bytes; download deleted)",
                             name, r->urls[u], r->sha256, got, p.len);
                    p.len = 0;
                    rc = GT_FETCH_ERROR;
                } else if (fsync(p.fd) != 0 || rename(part_path, final) != 0) {
                    snprintf(why, sizeof why, "cannot move %s into place: %s", part_path,
                             strerror(errno));
                    rc = GT_FETCH_ERROR;
                } else {
                    snprintf(out, cap, "%s", final);
                    rc = 0;
                }
                break;
            }
            if (last == MISSING || last == FATAL || last == UNREACHABLE)
                break; /* not retried: next URL */
            if (last == RESTART)
                truncate_part(&p);
            if (a == attempts) {
                size_t l = strlen(why);
                snprintf(why + l, sizeof why - l, "; gave up after %d attempts", attempts);
                break;
            }
            note(r, "%s: %s; retrying in %.1f s (attempt %d/%d)", name, why, delay, a + 1,
                 attempts);
            sleep_s(delay);
            delay = delay * 2 > MAX_DELAY_S ? MAX_DELAY_S : delay * 2;
        }
        if (last != MISSING && last != UNREACHABLE)
            all_missing = false;
    }
    curl_easy_cleanup(c);
    close(p.fd);
    if (rc == 0)
        return 0;
    if (p.len == 0)
        unlink(part_path); /* an empty .part is no progress worth keeping */
    gt_err_set(err, "%s", why);
    return all_missing ? GT_FETCH_MISSING : GT_FETCH_ERROR;
}

int gt_fetch(const gt_fetch_req *r, char *out, size_t cap, gt_err *err)
{
    pthread_once(&curl_once, curl_init_once);
    if (!valid_sha(r->sha256))
        return gt_err_set(err, "sha256 must be 64 hex digits, got '%s'",
                          r->sha256 ? r->sha256 : "(none)"),
               GT_FETCH_ERROR;
    char name[256];
    if (r->name && *r->name) {
        if (strchr(r->name, '/') || !strcmp(r->name, "..") || !strcmp(r->name, "."))
            return gt_err_set(err, "artifact name '%s' must be a plain file name", r->name),
                   GT_FETCH_ERROR;
        snprintf(name, sizeof name, "%s", r->name);
    } else if (r->n_urls > 0 && name_from_url(r->urls[0], name, sizeof name) == 0) {
    } else {
        return gt_err_set(err, "artifact %.12s has no name and no URL to take one from",
                          r->sha256),
               GT_FETCH_ERROR;
    }

    char cache[PATH_MAX], final[PATH_MAX + 300], got[65];
    if (r->cache_dir && *r->cache_dir)
        snprintf(cache, sizeof cache, "%s", r->cache_dir);
    else
        gt_fetch_default_cache(cache, sizeof cache);
    snprintf(final, sizeof final, "%s/%s", cache, name);

    if (file_exists(final, NULL)) {
        gt_err e = {{0}};
        int v = verify_file(final, r, got, &e);
        if (v == 0) {
            snprintf(out, cap, "%s", final);
            return 0;
        }
        note(r, "cached %s is not the artifact (sha256 %s, expected %s); deleting it", final,
             v == 1 ? got : e.msg, r->sha256);
        unlink(final);
    }
    if (try_mirrors(r, name, out, cap))
        return 0;
    if (r->n_urls == 0) {
        const char *m = r->mirror_dir ? r->mirror_dir : getenv("GT_MODEL_MIRROR");
        return gt_err_set(err, "%s: not in the cache (%s) nor any mirror (%s), and no URL given",
                          name, cache, m && *m ? m : "none set"),
               GT_FETCH_MISSING;
    }
    if (gt_fetch_mkdirs(cache, err) != 0)
        return GT_FETCH_ERROR;
    int rc = download(r, name, final, out, cap, err);
    if (rc != 0)
        gt_err_wrap(err, "fetching %s", name);
    return rc;
}
