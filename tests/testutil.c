/* testutil.c: see testutil.h. */
#include "testutil.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "gt/backend.h"
#include "gt/error.h"
#include "gt/gguf.h"
#include "gt/synth.h"
#include "gt/tokenizer.h"

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

bool gt_test_no_shared(void)
{
    const char *v = getenv("GT_TEST_NO_SHARED");
    return v && strcmp(v, "1") == 0;
}

static const char *gt_test_model_shared(const char *relpath);

const char *gt_test_model(const char *relpath)
{
    static char buf[8][4096];
    static int slot;
    char *out = buf[slot++ % 8];
    if (strncmp(relpath, "vocab/", 6) == 0 && !gt_test_model_shared(relpath)) {
        /* ci/fetch-vocabs.sh puts llama.cpp's vocabularies in the fetch
         * cache: a fresh clone has them too. */
        const char *cache = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (cache)
            snprintf(out, 4096, "%s/gauntlet/models/%s", cache, relpath);
        else
            snprintf(out, 4096, "%s/.cache/gauntlet/models/%s", home ? home : "/tmp", relpath);
        return exists(out) ? out : NULL;
    }
    return gt_test_model_shared(relpath);
}

static const char *gt_test_model_shared(const char *relpath)
{
    static char buf[8][4096];
    static int slot;
    char *out = buf[slot++ % 8];
    if (gt_test_no_shared())
        return NULL;
    const char *dir = getenv("GT_MODEL_DIR");
    if (dir) {
        snprintf(out, 4096, "%s/%s", dir, relpath);
        if (exists(out))
            return out;
    }
    snprintf(out, 4096, "%s/models/%s", GT_SHARED_DIR, relpath);
    return exists(out) ? out : NULL;
}

const char *gt_test_shared(const char *relpath)
{
    static char buf[4][4096];
    static int slot;
    char *out = buf[slot++ % 4];
    if (gt_test_no_shared())
        return NULL;
    snprintf(out, 4096, "%s/%s", GT_SHARED_DIR, relpath);
    return exists(out) ? out : NULL;
}

/* The stand-in's seed: fixed, so every run and machine gets the same file. */
#define STANDIN_SEED 260

/* Zeroes the output.weight rows of the special and byte tokens (logit 0)
 * in the f32 model at path. Random weights otherwise pick byte tokens as
 * often as pieces (half of a 512-token vocabulary is bytes) and emit text
 * that is not UTF-8, and </s> stops generations early: a trained model does
 * neither, and the tests (serve's text, logprob offsets, stop strings) are
 * about the runtime, not about mojibake. Among ~250 random piece logits one
 * is positive, so greedy decoding only ever picks pieces. 0 or -1. */
static int standin_only_pieces(const char *path, gt_err *err)
{
    gt_gguf *g;
    if (gt_gguf_open(path, &g, err) != 0)
        return -1;
    gt_tokenizer *tok = NULL;
    const gt_gguf_tensor *t = gt_gguf_find_tensor(g, "output.weight");
    int rc = -1;
    if (!t || t->type != GT_TYPE_F32 || gt_tokenizer_from_gguf(g, &tok, err) != 0) {
        gt_err_set(err, "%s: no f32 output.weight or no tokenizer", path);
        gt_gguf_close(g);
        return -1;
    }
    size_t data_size;
    gt_gguf_data(g, 0, &data_size);
    const uint64_t at = gt_gguf_file_size(g) - data_size + t->offset;
    const size_t row = (size_t)t->ne[0] * sizeof(float), size = (size_t)gt_gguf_file_size(g);
    char *file = gt_test_slurp(path);
    if (file) {
        for (int32_t id = 0; id < (int32_t)t->ne[1]; id++) {
            const char *piece = gt_token_piece(tok, id);
            if (id == gt_tokenizer_bos(tok) || id == gt_tokenizer_eos(tok) || !piece ||
                piece[0] == '\0' || (piece[0] == '<' && piece[strlen(piece) - 1] == '>'))
                memset(file + at + (size_t)id * row, 0, row);
        }
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.part", path);
        FILE *f = fopen(tmp, "wb");
        rc = f && fwrite(file, 1, size, f) == size ? 0 : -1;
        if (f && fclose(f) != 0)
            rc = -1;
        if (rc == 0 && rename(tmp, path) != 0)
            rc = -1;
        if (rc != 0)
            gt_err_set(err, "cannot rewrite %s", path);
        free(file);
    }
    gt_tokenizer_free(tok);
    gt_gguf_close(g);
    return rc;
}

const char *gt_test_llama(void)
{
    static char path[4096];
    if (path[0] && exists(path))
        return path;
    const char *real = gt_test_model("stories260K.gguf");
    if (real) {
        snprintf(path, sizeof path, "%s", real);
        return path;
    }
    snprintf(path, sizeof path, "%s", gt_test_tmp("llama-standin.gguf"));
    if (exists(path))
        return path;
    gt_err err = {{0}};
    if (gt_synth_write(path, "stories260k", STANDIN_SEED, GT_TYPE_F32, &err) != 0 ||
        standin_only_pieces(path, &err) != 0) {
        fprintf(stderr, "cannot write the synthetic stand-in %s: %s\n", path, err.msg);
        exit(1);
    }
    printf("stories260K.gguf not found: using a synthetic stand-in (synth preset stories260k, "
           "seed %d, special and byte tokens' output rows zeroed) at %s\n", STANDIN_SEED, path);
    return path;
}

bool gt_test_llama_is_stories(void)
{
    return gt_test_model("stories260K.gguf") != NULL;
}

const char *gt_test_quickstart(void)
{
    static char out[4096];
    char *text = gt_test_slurp(GT_SOURCE_DIR "/matrices/quickstart.json");
    ck_assert_msg(text != NULL, "matrices/quickstart.json unreadable");
    cJSON *root = cJSON_Parse(text);
    free(text);
    ck_assert_msg(root != NULL, "matrices/quickstart.json does not parse");
    /* root is relative to the matrix's folder (gt_test_tmp's): up to / once
     * per level of it, then down to the source tree */
    snprintf(out, sizeof out, "%s", gt_test_tmp("quickstart.json"));
    char up[512] = "";
    for (const char *p = strchr(out + 1, '/'); p; p = strchr(p + 1, '/'))
        strncat(up, "../", sizeof up - strlen(up) - 1);
    strncat(up, GT_SOURCE_DIR + 1, sizeof up - strlen(up) - 1);
    cJSON_ReplaceItemInObject(root, "root", cJSON_CreateString(up));
    /* The tests qualify the smoke tier: the README's main job (the matrix's
     * default tier, with accuracy and performance) runs in readme_commands
     * and in CI's fresh clone. */
    cJSON_DeleteItemFromObject(root, "default_tier");
    cJSON_AddStringToObject(root, "default_tier", "smoke");
    const bool standin = !gt_test_llama_is_stories();
    int found = 0;
    cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(root, "models"))
    {
        const cJSON *id = cJSON_GetObjectItem(m, "id");
        if (!cJSON_IsString(id) || strcmp(id->valuestring, "stories260k") != 0)
            continue;
        found++;
        cJSON_ReplaceItemInObject(m, "path", cJSON_CreateString(gt_test_llama()));
        if (standin) { /* they describe the real file */
            cJSON_DeleteItemFromObject(m, "url");
            cJSON_DeleteItemFromObject(m, "sha256");
            cJSON_DeleteItemFromObject(m, "size");
        }
    }
    ck_assert_msg(found <= 1, "quickstart.json: %d models with id stories260k", found);
    /* A build without the cuda plugin (GT_CUDA=OFF, as ci/sanitize.sh's) has
     * cuda cells "not built", not "no device": the copy allows that too, and
     * says so. The plain build (and CI's test step) runs the matrix as is. */
    if (access(GT_BINARY_DIR "/libgt-backend-cuda.so", F_OK) != 0) {
        cJSON *skips = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "gate"), "allowed_skips");
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "category", "not built");
        cJSON_AddStringToObject(e, "backend", "cuda");
        if (skips)
            cJSON_AddItemToArray(skips, e);
        else
            cJSON_Delete(e);
        printf("quickstart: this build has no cuda plugin; the test's copy of the matrix also "
               "allows cuda cells 'not built'\n");
    }
    char *json = cJSON_Print(root);
    cJSON_Delete(root);
    gt_test_write_file(out, json, strlen(json));
    free(json);
    return out;
}

void gt_test_assert_junit(const char *xml)
{
    ck_assert_msg(gt_test_sh("xmllint --noout --schema '%s/reports/junit.xsd' '%s'", GT_SOURCE_DIR,
                             xml) == 0,
                  "%s is not valid against reports/junit.xsd", xml);
    const char *ant = gt_test_shared("schemas/junit.xsd");
    if (ant)
        ck_assert_msg(gt_test_sh("xmllint --noout --schema '%s' '%s'", ant, xml) == 0,
                      "%s is not valid against %s", xml, ant);
}

static int n_skipped_cases;

void gt_test_add_if_(TCase *tc, const TTest *tf, const char *name, bool ok, const char *why)
{
    if (ok) {
        tcase_add_test(tc, tf);
        return;
    }
    printf("SKIP %s: %s\n", name, why);
    fflush(stdout);
    n_skipped_cases++;
}

/* $env when it names a file, else file in the fetch cache
 * ($XDG_CACHE_HOME/gauntlet/models or ~/.cache/gauntlet/models), else NULL. */
static const char *fetched_model(const char *env_name, const char *file, char *out, size_t cap)
{
    const char *env = getenv(env_name);
    if (env && exists(env))
        return env;
    const char *cache = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (cache)
        snprintf(out, cap, "%s/gauntlet/models/%s", cache, file);
    else
        snprintf(out, cap, "%s/.cache/gauntlet/models/%s", home ? home : "/tmp", file);
    return exists(out) ? out : NULL;
}

const char *gt_test_pyoracle(void)
{
    const char *p = getenv("GT_PYORACLE");
    static char buf[4096];
    if (p && *p)
        return p;
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    snprintf(buf, sizeof buf, "%s/gauntlet/pyoracle",
             xdg && *xdg ? xdg : home ? gt_test_join(home, ".cache") : "/tmp");
    return buf;
}

bool gt_test_have_pyoracle(void)
{
    return gt_test_sh("PYTHONPATH='%s' python3 -c 'import gguf, numpy' >/dev/null 2>&1",
                      gt_test_pyoracle()) == 0;
}

const char *gt_test_fetched(const char *env_name, const char *file)
{
    static char out[4096];
    return fetched_model(env_name, file, out, sizeof out);
}

const char *gt_test_smollm2(void)
{
    static char out[4096];
    return fetched_model("GT_SMOLLM2", "SmolLM2-135M-Instruct.Q4_1.gguf", out, sizeof out);
}

const char *gt_test_gemma3(void)
{
    static char out[4096];
    return fetched_model("GT_GEMMA3", "gemma-3-270m-q4_k_m.gguf", out, sizeof out);
}

/* The temporary folder: /tmp/gt-test-<pid of the test binary>, named before
 * main runs. A process Check forks for a case gets its own folder inside it
 * (case-<pid>), as fresh as a case expects, removed when that case's process
 * exits; the root goes when the test binary exits, on success or failure,
 * so a run leaves nothing in /tmp. */
static char tmp_root[256];
static pid_t tmp_owner;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static const char *tmp_dir(void)
{
    static char dir[300];
    static pid_t made_for;
    if (made_for != getpid()) {
        made_for = getpid();
        mkdir(tmp_root, 0700);
        if (made_for == tmp_owner)
            snprintf(dir, sizeof dir, "%s", tmp_root);
        else
            snprintf(dir, sizeof dir, "%s/case-%d", tmp_root, (int)made_for);
        mkdir(dir, 0700);
    }
    return dir;
}

static void tmp_cleanup(void)
{
    char own[300];
    if (getpid() == tmp_owner)
        snprintf(own, sizeof own, "%s", tmp_root);
    else
        snprintf(own, sizeof own, "%s/case-%d", tmp_root, (int)getpid());
    nftw(own, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* SIGTERM/SIGINT (CTest's timeout, a ^C) clean up too; SIGKILL cannot, and
 * CTest's tmp_leftovers test, run last, names what such a run left. */
static void tmp_on_signal(int sig)
{
    tmp_cleanup();
    signal(sig, SIG_DFL);
    raise(sig);
}

__attribute__((constructor)) static void tmp_init(void)
{
    tmp_owner = getpid();
    snprintf(tmp_root, sizeof tmp_root, "/tmp/gt-test-%d", (int)tmp_owner);
    /* What the programs a test runs make in $TMPDIR (qualify's scratch
     * folder, a script's mktemp) goes with the test's folder, even when the
     * test kills them before they clean up. */
    mkdir(tmp_root, 0700);
    setenv("TMPDIR", tmp_root, 1);
    atexit(tmp_cleanup);
    signal(SIGTERM, tmp_on_signal);
    signal(SIGINT, tmp_on_signal);
}

const char *gt_test_tmp(const char *name)
{
    static char buf[8][4096];
    static int slot;
    char *out = buf[slot++ % 8];
    snprintf(out, 4096, "%s/%s", tmp_dir(), name);
    return out;
}

void gt_test_write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s", path);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

char *gt_test_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = '\0';
    fclose(f);
    return s;
}

const char *gt_test_join(const char *dir, const char *name)
{
    static char buf[8][4200];
    static int slot;
    char *p = buf[slot++ % 8];
    snprintf(p, 4200, "%s/%s", dir, name);
    return p;
}

double gt_test_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

sqlite3 *gt_test_db_open(const char *path)
{
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_busy_timeout(h, 5000);
    return h;
}

static sqlite3_stmt *prepare(sqlite3 *h, const char *fmt, va_list ap)
{
    char sql[2048];
    vsnprintf(sql, sizeof sql, fmt, ap);
    sqlite3_stmt *st;
    ck_assert_msg(sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(h));
    return st;
}

long long gt_test_q_int(sqlite3 *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sqlite3_stmt *st = prepare(h, fmt, ap);
    va_end(ap);
    long long v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    sqlite3_finalize(st);
    return v;
}

const char *gt_test_q_text(sqlite3 *h, const char *fmt, ...)
{
    static char out[16384];
    va_list ap;
    va_start(ap, fmt);
    sqlite3_stmt *st = prepare(h, fmt, ap);
    va_end(ap);
    out[0] = '\0';
    while (sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *s = sqlite3_column_text(st, 0);
        size_t len = strlen(out);
        snprintf(out + len, sizeof out - len, "%s\n", s ? (const char *)s : "NULL");
    }
    sqlite3_finalize(st);
    return out;
}

int gt_test_sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

int gt_test_run_in(const char *dir, char *out, size_t cap, const char *fmt, ...)
{
    char cmd[8192], line[9000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    snprintf(line, sizeof line, "cd '%s' && XDG_CACHE_HOME='%s/cache' %s 2>&1", dir, dir, cmd);
    FILE *p = popen(line, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    char sink[4096]; /* the rest, so the command never blocks on a full pipe */
    while (fread(sink, 1, sizeof sink, p) > 0)
        ;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void gt_test_send_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        c += w;
        n -= (size_t)w;
    }
}

static void *http_loop(void *ud)
{
    gt_test_http *s = ud;
    while (!s->stop) {
        fd_set fds;
        FD_ZERO(&fds);
        FD_SET(s->fd, &fds);
        struct timeval tv = {0, 50 * 1000};
        if (select(s->fd + 1, &fds, NULL, NULL, &tv) <= 0)
            continue;
        int c = accept(s->fd, NULL, NULL);
        if (c < 0)
            continue;
        char req[4096] = "";
        size_t got = 0;
        while (got < sizeof req - 1 && !strstr(req, "\r\n\r\n")) {
            ssize_t r = recv(c, req + got, sizeof req - 1 - got, 0);
            if (r <= 0)
                break;
            got += (size_t)r;
            req[got] = '\0';
        }
        if (strstr(req, "\r\n\r\n"))
            s->fn(c, req, s->user);
        shutdown(c, SHUT_RDWR);
        close(c);
    }
    return NULL;
}

void gt_test_http_start(gt_test_http *s, gt_test_http_fn fn, void *user)
{
    memset(s, 0, sizeof *s);
    s->fn = fn;
    s->user = user;
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(s->fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(s->fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(s->fd, 16), 0);
    socklen_t al = sizeof a;
    ck_assert_int_eq(getsockname(s->fd, (struct sockaddr *)&a, &al), 0);
    s->port = ntohs(a.sin_port);
    ck_assert_int_eq(pthread_create(&s->th, NULL, http_loop, s), 0);
}

void gt_test_http_stop(gt_test_http *s)
{
    s->stop = 1;
    pthread_join(s->th, NULL);
    close(s->fd);
}

/* GET /health on 127.0.0.1:port answers 200. */
static int healthy(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char buf[64] = "";
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        const char *req = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
        gt_test_send_all(fd, req, strlen(req));
        size_t got = 0;
        ssize_t r;
        while (got < 12 && (r = recv(fd, buf + got, sizeof buf - 1 - got, 0)) > 0)
            got += (size_t)r;
        buf[got] = '\0';
    }
    close(fd);
    return strncmp(buf, "HTTP/1.1 200", 12) == 0 || strncmp(buf, "HTTP/1.0 200", 12) == 0;
}

int gt_test_serve_start(gt_test_server *s, const char *model, const char *const *extra)
{
    static int n;
    char name[64];
    snprintf(name, sizeof name, "serve%d-%d.log", (int)getpid(), n++);
    snprintf(s->log, sizeof s->log, "%s", gt_test_tmp(name));
    const char *argv[32] = {"gauntlet", "serve", "-m", model, "-b", "reference",
                            "--port", "0", "-t", "1"};
    int k = 10;
    for (int i = 0; extra && extra[i] && k < 31; i++)
        argv[k++] = extra[i];
    argv[k] = NULL;
    s->port = 0;
    s->pid = fork();
    if (s->pid < 0) {
        s->pid = 0;
        return -1;
    }
    if (s->pid == 0) {
        FILE *f = freopen(s->log, "w", stderr);
        (void)f;
        execv(GT_BINARY_DIR "/gauntlet", (char *const *)argv);
        _exit(127);
    }
    const char *mark = "listening on http://127.0.0.1:";
    for (int i = 0; i < 200 && !s->port; i++) { /* 10 s */
        usleep(50 * 1000);
        FILE *f = fopen(s->log, "r");
        char line[512];
        while (f && fgets(line, sizeof line, f)) {
            const char *p = strstr(line, mark);
            if (p)
                s->port = atoi(p + strlen(mark));
        }
        if (f)
            fclose(f);
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
            s->pid = 0;
            return -1;
        }
    }
    for (int i = 0; s->port && i < 200; i++) { /* 10 s */
        if (healthy(s->port))
            return 0;
        usleep(50 * 1000);
    }
    return -1;
}

int gt_test_serve_stop(gt_test_server *s)
{
    if (s->pid <= 0)
        return -1;
    kill(s->pid, SIGTERM);
    for (int i = 0; i < 400; i++) { /* 20 s */
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            unlink(s->log);
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        usleep(50 * 1000);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
    return -1;
}

int gt_test_live(const char *tag, const char *word)
{
    DIR *d = opendir("/proc");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char p[300], buf[16384];
        snprintf(p, sizeof p, "/proc/%s/environ", e->d_name);
        FILE *f = fopen(p, "rb");
        if (!f)
            continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        bool tagged = false;
        for (size_t i = 0; i < len && !tagged; i += strlen(buf + i) + 1) {
            buf[len] = '\0';
            tagged = strcmp(buf + i, tag) == 0;
        }
        if (!tagged)
            continue;
        snprintf(p, sizeof p, "/proc/%s/cmdline", e->d_name);
        f = fopen(p, "rb");
        len = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f)
            fclose(f);
        if (len && memmem(buf, len, word, strlen(word)))
            n++;
    }
    if (d)
        closedir(d);
    return n;
}

int gt_test_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    const int failed = srunner_ntests_failed(sr), ran = srunner_ntests_run(sr);
    /* Zero coverage is a failure: no case ran, and none was skipped saying
     * why (or CK_RUN_CASE names a test case this suite does not have, so
     * the skips printed are not what kept it from running). */
    const char *only = getenv("CK_RUN_CASE");
    const bool unmatched = only && only[0] && !suite_tcase(s, only);
    srunner_free(sr); /* frees s too */
    if (ran == 0 && failed == 0 && (n_skipped_cases == 0 || unmatched)) {
        printf("FAIL: 0 cases ran (CK_RUN_SUITE/CK_RUN_CASE filter matched nothing?)\n");
        return 1;
    }
    if (ran == 0 && failed == 0) {
        printf("SKIP: every case skipped (%d, reasons above)\n", n_skipped_cases);
        return GT_TEST_SKIP;
    }
    return failed == 0 ? 0 : 1;
}

void gt_test_require(const char *path, const char *what)
{
    if (!path) {
        printf("SKIP: %s not found (looked in ../shared/models and $GT_MODEL_DIR)\n", what);
        exit(GT_TEST_SKIP);
    }
}

void gt_test_require_gauntlet(void)
{
    const char *bin = GT_BINARY_DIR "/gauntlet";
    if (access(bin, X_OK) != 0) {
        printf("SKIP: %s not built\n", bin);
        exit(GT_TEST_SKIP);
    }
}

bool gt_test_opencl_opens(char *why, size_t cap)
{
    int fds[2];
    why[0] = '\0';
    if (pipe(fds) != 0) {
        snprintf(why, cap, "pipe failed");
        return false;
    }
    const pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        gt_backend *b = NULL;
        gt_err err = {{0}};
        const int rc = gt_backend_open("opencl", NULL, &b, &err);
        if (rc != 0 && write(fds[1], err.msg, strlen(err.msg)) < 0)
            _exit(2);
        _exit(rc == 0 ? 0 : 1);
    }
    close(fds[1]);
    const ssize_t got = read(fds[0], why, cap - 1);
    why[got > 0 ? got : 0] = '\0';
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}
