/* testutil.c: see testutil.h. */
#include "testutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

const char *gt_test_model(const char *relpath)
{
    static char buf[8][4096];
    static int slot;
    char *out = buf[slot++ % 8];
    const char *dir = getenv("GT_MODEL_DIR");
    if (dir) {
        snprintf(out, 4096, "%s/%s", dir, relpath);
        if (exists(out))
            return out;
    }
    snprintf(out, 4096, "%s/models/%s", GT_SHARED_DIR, relpath);
    return exists(out) ? out : NULL;
}

const char *gt_test_smollm2(void)
{
    static char out[4096];
    const char *env = getenv("GT_SMOLLM2");
    if (env && exists(env))
        return env;
    const char *cache = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (cache)
        snprintf(out, sizeof out, "%s/gauntlet/models/SmolLM2-135M-Instruct.Q4_1.gguf", cache);
    else
        snprintf(out, sizeof out, "%s/.cache/gauntlet/models/SmolLM2-135M-Instruct.Q4_1.gguf",
                 home ? home : "/tmp");
    return exists(out) ? out : NULL;
}

const char *gt_test_tmp(const char *name)
{
    static char dir[256];
    static char buf[8][4096];
    static int slot;
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/gt-test-%d", (int)getpid());
        mkdir(dir, 0700);
    }
    char *out = buf[slot++ % 8];
    snprintf(out, 4096, "%s/%s", dir, name);
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

int gt_test_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

void gt_test_require(const char *path, const char *what)
{
    if (!path) {
        printf("SKIP: %s not found (looked in ../shared/models and $GT_MODEL_DIR)\n", what);
        exit(GT_TEST_SKIP);
    }
}
