/* test_fetch.c: gt_fetch and `gauntlet fetch` against a fault-injecting HTTP
 * server on 127.0.0.1 that this test starts itself.
 *
 * The server (testutil's gt_test_http: one thread, "Connection: close" on
 * every answer) is routed by the first path segment; each route is a fault: a body cut off
 * halfway (then Range honoured, or ignored), a flipped byte, 500 then 200,
 * 404/403, headers that never come. Every case checks what the fetch
 * returned, what the server saw (hits, the Range asked for) and that the
 * cache holds only verified files: never a corrupt one, never a stray .part
 * unless the contract says it is kept. fetch.c is compiled into the test so
 * its static helpers and tuning knobs are exercised directly. */
#ifndef GT_VERSION
#define GT_VERSION "test"
#endif
#include "../harness/net/fetch.c"
#include "../harness/net/fetch_model.c"
#include "../harness/net/fetch_pypi.c"
#include "../harness/base/sha256.c"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "testutil.h"

#define ART_LEN (300 * 1024)

enum route { RT_OK, RT_DROP, RT_NORANGE, RT_CORRUPT, RT_FLAKY, RT_MISSING, RT_FORBID, RT_SLOW, RT_SHARD1,
             RT_SHARD2, N_ROUTES };
static const char *ROUTES[N_ROUTES] = {"ok", "drop", "norange", "corrupt", "flaky",
                                       "missing", "forbid", "slow", "s1", "s2"};

static uint8_t art[ART_LEN];
static char art_sha[65], corrupt_sha[65], shard_sha[2][65];

typedef struct server {
    gt_test_http http;
    int hits[N_ROUTES];
    long last_range[N_ROUTES]; /* start of the last Range asked for, -1 none */
} server;

static server srv;
static char tmpdir[256], cache_dir[300], mirror_dir[300];

static void send_status(int fd, int code, const char *text)
{
    char h[256];
    int n = snprintf(h, sizeof h,
                     "HTTP/1.1 %d %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s", code,
                     text, strlen(text), text);
    gt_test_send_all(fd, h, (size_t)n);
}

/* Serves data[0..len) honouring "Range: bytes=N-" unless no_range; sends
 * only the first `cut` bytes of the body when cut > 0 (a dropped connection). */
static void send_body(int fd, const uint8_t *data, size_t len, long range, bool no_range, size_t cut)
{
    char h[512];
    size_t start = 0;
    int n;
    if (range >= 0 && !no_range) {
        if ((size_t)range >= len) {
            send_status(fd, 416, "range not satisfiable");
            return;
        }
        start = (size_t)range;
        n = snprintf(h, sizeof h,
                     "HTTP/1.1 206 Partial Content\r\nContent-Length: %zu\r\n"
                     "Content-Range: bytes %zu-%zu/%zu\r\nConnection: close\r\n\r\n",
                     len - start, start, len - 1, len);
    } else {
        n = snprintf(h, sizeof h,
                     "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nAccept-Ranges: bytes\r\n"
                     "Connection: close\r\n\r\n", len);
    }
    gt_test_send_all(fd, h, (size_t)n);
    size_t body = len - start;
    gt_test_send_all(fd, data + start, cut > 0 && cut < body ? cut : body);
}

/* gt_test_http's handler: one request head, answered by its route. */
static void handle(int fd, const char *req, void *user)
{
    (void)user;
    char path[256] = "";
    if (sscanf(req, "GET %255s", path) != 1)
        return;
    long range = -1;
    const char *rh = strcasestr(req, "\r\nRange: bytes=");
    if (rh)
        range = strtol(rh + 15, NULL, 10);
    int route = -1;
    for (int i = 0; i < N_ROUTES; i++) {
        size_t l = strlen(ROUTES[i]);
        if (path[0] == '/' && strncmp(path + 1, ROUTES[i], l) == 0 && path[1 + l] == '/')
            route = i;
    }
    if (route < 0) {
        send_status(fd, 404, "no such route");
        return;
    }
    int hit = ++srv.hits[route];
    srv.last_range[route] = range;
    static uint8_t bad[ART_LEN];
    switch (route) {
    case RT_OK: send_body(fd, art, ART_LEN, range, false, 0); break;
    case RT_DROP: send_body(fd, art, ART_LEN, range, false, hit == 1 ? ART_LEN / 2 : 0); break;
    case RT_NORANGE: send_body(fd, art, ART_LEN, range, hit > 1, hit == 1 ? ART_LEN / 3 : 0); break;
    case RT_CORRUPT:
        memcpy(bad, art, ART_LEN);
        bad[1000] ^= 0x40;
        send_body(fd, bad, ART_LEN, range, false, 0);
        break;
    case RT_FLAKY:
        if (hit == 1)
            send_status(fd, 500, "internal error");
        else
            send_body(fd, art, ART_LEN, range, false, 0);
        break;
    case RT_MISSING: send_status(fd, 404, "not found"); break;
    case RT_FORBID: send_status(fd, 403, "forbidden"); break;
    case RT_SLOW:
        for (int i = 0; i < 30 && !srv.http.stop; i++) /* 3 s of silence, bounded */
            usleep(100 * 1000);
        break;
    case RT_SHARD1: send_body(fd, art, ART_LEN / 2, range, false, 0); break;
    case RT_SHARD2: send_body(fd, art + ART_LEN / 2, ART_LEN / 2, range, false, 0); break;
    }
}

static void setup(void)
{
    memset(&srv, 0, sizeof srv);
    gt_test_http_start(&srv.http, handle, NULL);
    snprintf(tmpdir, sizeof tmpdir, "%s", gt_test_tmp("fetch-XXXXXX"));
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(cache_dir, sizeof cache_dir, "%s/cache", tmpdir);
    snprintf(mirror_dir, sizeof mirror_dir, "%s/mirror", tmpdir);
    mkdir(mirror_dir, 0755);
}

static void teardown(void)
{
    gt_test_http_stop(&srv.http);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static const char *url(int route, const char *name)
{
    static char buf[4][256];
    static int slot;
    char *u = buf[slot++ % 4];
    snprintf(u, 256, "http://127.0.0.1:%d/%s/%s", srv.http.port, ROUTES[route], name);
    return u;
}

/* A request with test-sized timeouts and delays. */
static gt_fetch_req req_for(const char **urls, int n, const char *sha, int64_t size)
{
    gt_fetch_req r = {.urls = urls, .n_urls = n, .sha256 = sha, .size = size,
                      .cache_dir = cache_dir, .mirror_dir = "", .progress = 0, .quiet = true,
                      .attempts = 3, .retry_delay_s = 0.05, .connect_timeout_s = 2,
                      .low_speed_time_s = 1};
    return r;
}

/* The names in the cache folder, space-separated ("" when empty or absent). */
static const char *cache_listing(void)
{
    static char out[1024];
    out[0] = '\0';
    DIR *d = opendir(cache_dir);
    if (!d)
        return out;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            strncat(out, e->d_name, sizeof out - strlen(out) - 2);
            strcat(out, " ");
        }
    closedir(d);
    return out;
}

static void assert_file_is(const char *path, const uint8_t *data, size_t len)
{
    char hex[65], want[65];
    uint64_t size = 0;
    gt_err err = {{0}};
    ck_assert_msg(gt_sha256_file(path, hex, &size, &err) == 0, "%s", err.msg);
    gt_sha256_hex(data, len, want);
    ck_assert_uint_eq(size, len);
    ck_assert_str_eq(hex, want);
}

START_TEST(test_plain_then_cached)
{
    const char *u[] = {url(RT_OK, "art.bin")};
    gt_fetch_req r = req_for(u, 1, art_sha, ART_LEN);
    char path[PATH_MAX];
    gt_err err = {{0}};
    ck_assert_msg(gt_fetch(&r, path, sizeof path, &err) == 0, "%s", err.msg);
    char want[PATH_MAX + 16];
    snprintf(want, sizeof want, "%s/art.bin", cache_dir);
    ck_assert_str_eq(path, want);
    assert_file_is(path, art, ART_LEN);
    ck_assert_str_eq(cache_listing(), "art.bin ");
    ck_assert_int_eq(srv.last_range[RT_OK], -1);
    /* A second fetch is served from the cache, without asking the server. */
    ck_assert_msg(gt_fetch(&r, path, sizeof path, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(srv.hits[RT_OK], 1);
    /* Upper-case hashes name the same artifact. */
    char upper[65];
    for (int i = 0; i < 65; i++)
        upper[i] = (char)toupper((unsigned char)art_sha[i]);
    r.sha256 = upper;
    ck_assert_msg(gt_fetch(&r, path, sizeof path, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(srv.hits[RT_OK], 1);
}
END_TEST

START_TEST(test_drop_resumes_with_range)
{
    const char *u[] = {url(RT_DROP, "art.bin")};
    gt_fetch_req r = req_for(u, 1, art_sha, ART_LEN);
    char path[PATH_MAX];
    gt_err err = {{0}};
    ck_assert_msg(gt_fetch(&r, path, sizeof path, &err) == 0, "%s", err.msg);
    assert_file_is(path, art, ART_LEN);
    ck_assert_int_eq(srv.hits[RT_DROP], 2);
    ck_assert_int_eq(srv.last_range[RT_DROP], ART_LEN / 2); /* asked only for the rest */
    ck_assert_str_eq(cache_listing(), "art.bin ");
}
END_TEST

START_TEST(test_range_ignored_restarts)
{
    const char *u[] = {url(RT_NORANGE, "art.bin")};
    gt_fetch_req r = req_for(u, 1, art_sha, ART_LEN);
    char path[PATH_MAX];
    gt_err err = {{0}};
    ck_assert_msg(gt_fetch(&r, path, sizeof path, &err) == 0, "%s", err.msg);
    assert_file_is(path, art, ART_LEN); /* not the first third twice */
    ck_assert_int_eq(srv.hits[RT_NORANGE], 2);
    ck_assert_int_eq(srv.last_range[RT_NORANGE], ART_LEN / 3);
    ck_assert_str_eq(cache_listing(), "art.bin ");
}
END_TEST

START_TEST(test_resume_part_from_earlier_run)
{
    ck_assert_int_eq(mkdir(cache_dir, 0755), 0);
    char part_path[PATH_MAX];
    snprintf(part_path, sizeof part_path, "%s/art.bin.part", cache_dir);
    gt_test_write_file(part_path, art, 100000);
    const char *u[] = {url(RT_OK, "art.bin")};
    gt_fetch_req r = req_for(u, 1, art_sha, ART_LEN);
    char path[PATH_MAX];
    gt_err err = {{0}};
    ck_assert_msg(gt_fetch(&r, path, sizeof path, &err) == 0, "%s", err.msg);
    assert_file_is(path, art, ART_LEN);
    ck_assert_int_eq(srv.last_range[RT_OK], 100000);
    ck_assert_str_eq(cache_listing(), "art.bin ");
}
END_TEST

START_TEST(test_corrupt_byte_deleted)
{
    const char *u[] = {url(RT_CORRUPT, "art.bin")};
    gt_fetch_req r = req_for(u, 1, art_sha, ART_LEN);
    char path[PATH_MAX];
    gt_err err = {{0}};
    ck_assert_int_eq(gt_fetch(&r, path, sizeof path, &err), GT_FETCH_ERROR);
    ck_assert_msg(strstr(err.msg, "sha256 mismatch"), "%s", err.msg);
    ck_assert_msg(strstr(err.msg, art_sha), "expected hash not named: %s", err.msg);
    ck_assert_msg(strstr(err.msg, corrupt_sha), "actual hash not named: %s", err.msg);
    ck_assert_str_eq(cache_listing(), "");
    ck_assert_int_eq(srv.hits[RT_CORRUPT], 1); /* a wrong hash is not a transient fault */
}
END_TEST

START_TEST(test_wrong_size_deleted)
{
    /* The server sends more than the entry says: restarted, then given up. */
    const char *u[] = {url(RT_OK, "art.bin")};
    gt_fetch_req r = req_for(u, 1, art_sha, ART_LEN - 10);
    char path[PATH_MAX];
    gt_err err = {{0}};
    ck_assert_int_eq(gt_fetch(&r, path, sizeof path, &err), GT_FETCH_ERROR);
    ck_assert_msg(strstr(err.msg, "expected"), "%s", err.msg);
    ck_assert_str_eq(cache_listing(), "");
}
END_TEST

START_TEST(test_500_then_200_retried)
{
    const char *u[] = {url(RT_FLAKY, "art.bin")};
    gt_fetch_req r = req_for(u, 1, art_sha, ART_LEN);
    char path[PATH_MAX];
    gt_err err = {{0}};
    ck_assert_msg(gt_fetch(&r, path, sizeof path, &err) == 0, "%s", err.msg);
    assert_file_is(path, art, ART_LEN);
    ck_assert_int_eq(srv.hits[RT_FLAKY], 2);
}
END_TEST

START_TEST(test_404_not_retried)
{
    const char *u[] = {url(RT_MISSING, "art.bin")};
    gt_fetch_req r = req_for(u, 1, art_sha, ART_LEN);
    char path[PATH_MAX];
    gt_err err = {{0}};
    ck_assert_int_eq(gt_fetch(&r, path, sizeof path, &err), GT_FETCH_MISSING);
    ck_assert_msg(strstr(err.msg, "HTTP 404") && strstr(err.msg, "not retried"), "%s", err.msg);
    ck_assert_msg(strstr(err.msg, u[0]), "URL not named: %s", err.msg);
    ck_assert_int_eq(srv.hits[RT_MISSING], 1);
    ck_assert_str_eq(cache_listing(), "");
}
END_TEST

START_TEST(test_403_then_fallback_url)
{
    const char *u[] = {url(RT_FORBID, "art.bin"), url(RT_OK, "art.bin")};
    gt_fetch_req r = req_for(u, 2, art_sha, ART_LEN);
    char path[PATH_MAX];
    gt_err err = {{0}};
    ck_assert_msg(gt_fetch(&r, path, sizeof path, &err) == 0, "%s", err.msg);
    assert_file_is(path, art, ART_LEN);
    ck_assert_int_eq(srv.hits[RT_FORBID], 1);
    ck_assert_int_eq(srv.hits[RT_OK], 1);
}
END_TEST

START_TEST(test_slow_headers_time_out)
{
    const char *u[] = {url(RT_SLOW, "art.bin")};
    gt_fetch_req r = req_for(u, 1, art_sha, ART_LEN);
    r.attempts = 2;
    char path[PATH_MAX];
    gt_err err = {{0}};
    double t0 = mono_now();
    ck_assert_int_eq(gt_fetch(&r, path, sizeof path, &err), GT_FETCH_ERROR);
    double dt = mono_now() - t0;
    ck_assert_msg(strstr(err.msg, "timed out") && strstr(err.msg, "gave up after 2 attempts"),
                  "%s", err.msg);
    ck_assert_msg(dt < 8.0, "took %.1f s", dt);
    ck_assert_str_eq(cache_listing(), "");
}
END_TEST

START_TEST(test_unreachable_is_missing)
{
    /* A port nobody listens on (ours, after closing): connection refused. */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(s, (struct sockaddr *)&a, sizeof a);
    socklen_t al = sizeof a;
    getsockname(s, (struct sockaddr *)&a, &al);
    close(s);
    char u0[128];
    snprintf(u0, sizeof u0, "http://127.0.0.1:%d/x/art.bin", ntohs(a.sin_port));
    const char *u[] = {u0};
    gt_fetch_req r = req_for(u, 1, art_sha, ART_LEN);
    char path[PATH_MAX];
    gt_err err = {{0}};
    r.retry_delay_s = 5; /* a retry would show as seconds */
    double t0 = gt_test_now();
    ck_assert_int_eq(gt_fetch(&r, path, sizeof path, &err), GT_FETCH_MISSING);
    double took = gt_test_now() - t0;
    /* A refused connection fails fast: one attempt, no backoff. */
    ck_assert_msg(strstr(err.msg, "(not retried)"), "%s", err.msg);
    ck_assert_msg(!strstr(err.msg, "gave up after"), "%s", err.msg);
    ck_assert_msg(took < 4.0, "refused connection took %.1f s", took);
    ck_assert_str_eq(cache_listing(), "");
}
END_TEST

START_TEST(test_mirror_hit_and_bad_mirror)
{
    char mpath[PATH_MAX];
    snprintf(mpath, sizeof mpath, "%s/art.bin", mirror_dir);
    gt_test_write_file(mpath, art, ART_LEN);
    const char *u[] = {url(RT_MISSING, "art.bin")};
    gt_fetch_req r = req_for(u, 1, art_sha, ART_LEN);
    char mirrors[700];
    snprintf(mirrors, sizeof mirrors, "%s/none:%s", tmpdir, mirror_dir);
    r.mirror_dir = mirrors;
    char path[PATH_MAX];
    gt_err err = {{0}};
    ck_assert_msg(gt_fetch(&r, path, sizeof path, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(path, mpath); /* used in place */
    ck_assert_int_eq(srv.hits[RT_MISSING], 0);
    ck_assert_str_eq(cache_listing(), "");

    /* GT_MODEL_MIRROR is the default mirror list. */
    r.mirror_dir = NULL;
    setenv("GT_MODEL_MIRROR", mirror_dir, 1);
    ck_assert_msg(gt_fetch(&r, path, sizeof path, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(path, mpath);
    unsetenv("GT_MODEL_MIRROR");

    /* A mirror copy with a wrong byte is ignored, and the URL is used. */
    uint8_t bad[ART_LEN];
    memcpy(bad, art, ART_LEN);
    bad[5] ^= 1;
    gt_test_write_file(mpath, bad, ART_LEN);
    const char *u2[] = {url(RT_OK, "art.bin")};
    r = req_for(u2, 1, art_sha, ART_LEN);
    r.mirror_dir = mirror_dir;
    ck_assert_msg(gt_fetch(&r, path, sizeof path, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(srv.hits[RT_OK], 1);
    assert_file_is(path, art, ART_LEN);

    /* No URL and no good copy anywhere: missing, with the places named. */
    r = req_for(NULL, 0, art_sha, ART_LEN);
    r.name = "other.bin";
    r.mirror_dir = mirror_dir;
    ck_assert_int_eq(gt_fetch(&r, path, sizeof path, &err), GT_FETCH_MISSING);
    ck_assert_msg(strstr(err.msg, "other.bin") && strstr(err.msg, mirror_dir), "%s", err.msg);
}
END_TEST

START_TEST(test_bad_cache_file_replaced)
{
    ck_assert_int_eq(mkdir(cache_dir, 0755), 0);
    char cpath[PATH_MAX];
    snprintf(cpath, sizeof cpath, "%s/art.bin", cache_dir);
    gt_test_write_file(cpath, art, 1234); /* truncated by hand, say */
    const char *u[] = {url(RT_OK, "art.bin")};
    gt_fetch_req r = req_for(u, 1, art_sha, ART_LEN);
    char path[PATH_MAX];
    gt_err err = {{0}};
    ck_assert_msg(gt_fetch(&r, path, sizeof path, &err) == 0, "%s", err.msg);
    assert_file_is(path, art, ART_LEN);
    ck_assert_int_eq(srv.hits[RT_OK], 1);
}
END_TEST

START_TEST(test_bad_requests)
{
    const char *u[] = {url(RT_OK, "art.bin")};
    gt_fetch_req r = req_for(u, 1, "abc", ART_LEN);
    char path[PATH_MAX];
    gt_err err = {{0}};
    ck_assert_int_eq(gt_fetch(&r, path, sizeof path, &err), GT_FETCH_ERROR);
    ck_assert_msg(strstr(err.msg, "64 hex"), "%s", err.msg);
    r = req_for(u, 1, art_sha, ART_LEN);
    r.name = "../escape.bin";
    ck_assert_int_eq(gt_fetch(&r, path, sizeof path, &err), GT_FETCH_ERROR);
    ck_assert_msg(strstr(err.msg, "plain file name"), "%s", err.msg);
    ck_assert_int_eq(srv.hits[RT_OK], 0);
}
END_TEST

START_TEST(test_shards_json)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"id\": \"split\", \"quants\": [\"q8_0\"], \"shards\": ["
             "{\"url\": \"%s\", \"sha256\": \"%s\", \"size\": %d},"
             "{\"urls\": [\"%s\", \"%s\"], \"sha256\": \"%s\", \"size\": %d}]}",
             url(RT_SHARD1, "m-00001-of-00002.gguf"), shard_sha[0], ART_LEN / 2,
             url(RT_MISSING, "m-00002-of-00002.gguf"), url(RT_SHARD2, "m-00002-of-00002.gguf"),
             shard_sha[1], ART_LEN / 2);
    cJSON *e = cJSON_Parse(text);
    ck_assert_ptr_nonnull(e);
    gt_fetch_req base = req_for(NULL, 0, NULL, -1);
    char **paths;
    int n;
    gt_err err = {{0}};
    ck_assert_msg(gt_fetch_model_json(e, &base, &paths, &n, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(n, 2);
    ck_assert_msg(strstr(paths[0], "m-00001-of-00002.gguf"), "%s", paths[0]);
    assert_file_is(paths[0], art, ART_LEN / 2);
    assert_file_is(paths[1], art + ART_LEN / 2, ART_LEN / 2);
    gt_fetch_paths_free(paths, n);
    cJSON_Delete(e);

    /* A shard with the wrong hash fails the model, naming the shard. */
    snprintf(text, sizeof text,
             "{\"id\": \"split2\", \"shards\": [{\"url\": \"%s\", \"sha256\": \"%s\"},"
             "{\"url\": \"%s\", \"sha256\": \"%s\"}]}",
             url(RT_SHARD1, "n-00001-of-00002.gguf"), shard_sha[0],
             url(RT_SHARD2, "n-00002-of-00002.gguf"), shard_sha[0]);
    e = cJSON_Parse(text);
    ck_assert_int_eq(gt_fetch_model_json(e, &base, &paths, &n, &err), GT_FETCH_ERROR);
    ck_assert_msg(strstr(err.msg, "model split2 shard 2/2") && strstr(err.msg, "mismatch"), "%s",
                  err.msg);
    ck_assert_ptr_null(paths);
    cJSON_Delete(e);

    /* An entry without a hash cannot be fetched. */
    e = cJSON_Parse("{\"id\": \"x\", \"url\": \"http://127.0.0.1:1/x.gguf\"}");
    ck_assert_int_eq(gt_fetch_model_json(e, &base, &paths, &n, &err), GT_FETCH_ERROR);
    ck_assert_msg(strstr(err.msg, "sha256"), "%s", err.msg);
    cJSON_Delete(e);
}
END_TEST

/* Runs the gauntlet binary; stdout into out; returns its exit code. */
static int run_cli(const char *args, char *out, size_t cap)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s/gauntlet fetch %s 2>%s/stderr.txt", GT_BINARY_DIR, args, tmpdir);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(test_cli)
{
    char args[2048], out[4096], want[PATH_MAX + 16];
    snprintf(args, sizeof args, "-q --cache-dir %s --url %s --sha256 %s --size %d", cache_dir,
             url(RT_OK, "art.bin"), art_sha, ART_LEN);
    ck_assert_int_eq(run_cli(args, out, sizeof out), 0);
    snprintf(want, sizeof want, "%s/art.bin\n", cache_dir);
    ck_assert_str_eq(out, want);

    snprintf(args, sizeof args, "-q --cache-dir %s --attempts 1 --url %s --sha256 %s", cache_dir,
             url(RT_MISSING, "gone.bin"), art_sha);
    ck_assert_int_eq(run_cli(args, out, sizeof out), 1);
    ck_assert_str_eq(out, "");

    ck_assert_int_eq(run_cli("--url http://127.0.0.1:1/x", out, sizeof out), 2); /* no sha */
    ck_assert_int_eq(run_cli("", out, sizeof out), 2);
    ck_assert_int_eq(run_cli("--help", out, sizeof out), 0);
    ck_assert_msg(strstr(out, "usage: gauntlet fetch"), "%s", out);

    /* A models file: a matrix-like object; synthetic / unhashed entries are skipped. */
    char mpath[PATH_MAX], text[2048];
    snprintf(mpath, sizeof mpath, "%s/models.json", tmpdir);
    snprintf(text, sizeof text,
             "{\"models\": [{\"id\": \"s\", \"synth\": true}, {\"id\": \"local\", \"path\": \"x.gguf\"},"
             "{\"id\": \"a\", \"url\": \"%s\", \"sha256\": \"%s\", \"file\": \"a.bin\"}]}",
             url(RT_OK, "art.bin"), art_sha);
    gt_test_write_file(mpath, text, strlen(text));
    snprintf(args, sizeof args, "-q --cache-dir %s %s", cache_dir, mpath);
    ck_assert_int_eq(run_cli(args, out, sizeof out), 0);
    snprintf(want, sizeof want, "%s/a.bin\n", cache_dir);
    ck_assert_str_eq(out, want);
    gt_test_write_file(mpath, "{\"models\": 3}", 13);
    ck_assert_int_eq(run_cli(args, out, sizeof out), 2);
}
END_TEST

int main(void)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < ART_LEN; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        art[i] = (uint8_t)(x >> 24);
    }
    gt_sha256_hex(art, ART_LEN, art_sha);
    art[1000] ^= 0x40;
    gt_sha256_hex(art, ART_LEN, corrupt_sha);
    art[1000] ^= 0x40;
    gt_sha256_hex(art, ART_LEN / 2, shard_sha[0]);
    gt_sha256_hex(art + ART_LEN / 2, ART_LEN / 2, shard_sha[1]);

    Suite *s = suite_create("fetch");
    TCase *tc = tcase_create("faults");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_plain_then_cached);
    tcase_add_test(tc, test_drop_resumes_with_range);
    tcase_add_test(tc, test_range_ignored_restarts);
    tcase_add_test(tc, test_resume_part_from_earlier_run);
    tcase_add_test(tc, test_corrupt_byte_deleted);
    tcase_add_test(tc, test_wrong_size_deleted);
    tcase_add_test(tc, test_500_then_200_retried);
    tcase_add_test(tc, test_404_not_retried);
    tcase_add_test(tc, test_403_then_fallback_url);
    tcase_add_test(tc, test_slow_headers_time_out);
    tcase_add_test(tc, test_unreachable_is_missing);
    tcase_add_test(tc, test_mirror_hit_and_bad_mirror);
    tcase_add_test(tc, test_bad_cache_file_replaced);
    tcase_add_test(tc, test_bad_requests);
    tcase_add_test(tc, test_shards_json);
    tcase_add_test(tc, test_cli);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
