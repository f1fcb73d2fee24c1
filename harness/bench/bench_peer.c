/* bench_peer.c: one run of llama.cpp's llama-bench for `gauntlet bench
 * --peer` (see bench.h). It is started with fork/exec (no shell: the paths
 * are the user's), its stdout (JSON) read back, its stderr kept apart so a
 * failure can quote it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "bench.h"

/* Everything fd gives until EOF, NUL-terminated (malloc'ed), or NULL. */
static char *read_all(int fd)
{
    size_t n = 0, cap = 1 << 14;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) {
                free(buf);
                return NULL;
            }
            buf = b;
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    if (buf)
        buf[n] = '\0';
    return buf;
}

/* The last non-empty line of s into out. */
static void last_line(const char *s, char *out, size_t cap)
{
    const char *end = s + strlen(s);
    while (end > s && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
        end--;
    const char *start = end;
    while (start > s && start[-1] != '\n')
        start--;
    snprintf(out, cap, "%.*s", (int)(end - start), start);
}

int bench_peer_llamabench(const char *path, const char *model, long pp, long tg, int n_depth,
                          const long *depth, int threads, bench_peer_run *out, char *why,
                          size_t why_len)
{
    memset(out, 0, sizeof *out);
    char p[24], n[24], t[24], d[BENCH_MAX_DEPTHS * 12 + 1] = "";
    snprintf(p, sizeof p, "%ld", pp);
    snprintf(n, sizeof n, "%ld", tg);
    snprintf(t, sizeof t, "%d", threads);
    for (int k = 0; k < n_depth; k++)
        snprintf(d + strlen(d), sizeof d - strlen(d), "%s%ld", k ? "," : "", depth[k]);
    char *const argv[] = {(char *)path, "-m", (char *)model, "-p", p, "-n", n, "-d", d, "-t", t,
                          "-r", "1", "-o", "json", NULL};
    char err_path[] = "/tmp/gt-peer-XXXXXX";
    int err_fd = mkstemp(err_path);
    int fds[2];
    if (err_fd < 0 || pipe(fds) != 0) {
        snprintf(why, why_len, "cannot make a pipe for %s: %s", path, strerror(errno));
        if (err_fd >= 0) {
            close(err_fd);
            unlink(err_path);
        }
        return -1;
    }
    unlink(err_path); /* the open descriptor keeps it */
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(err_fd, 2);
        close(fds[0]);
        close(fds[1]);
        execv(path, argv);
        fprintf(stderr, "cannot execute %s: %s\n", path, strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    if (pid < 0) {
        snprintf(why, why_len, "cannot fork for %s: %s", path, strerror(errno));
        close(fds[0]);
        close(err_fd);
        return -1;
    }
    char *json = read_all(fds[0]);
    close(fds[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    lseek(err_fd, 0, SEEK_SET);
    char *err = read_all(err_fd);
    close(err_fd);
    int rc = -1;
    cJSON *arr = json ? cJSON_Parse(json) : NULL;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !cJSON_IsArray(arr)) {
        char tail[300] = "";
        last_line(err ? err : "", tail, sizeof tail);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
            snprintf(why, why_len, "%s printed no JSON array (%.200s)", path, json ? json : "");
        else
            snprintf(why, why_len, "%s %s %d: %s", path,
                     WIFEXITED(st) ? "exited with code" : "was killed by signal",
                     WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), tail[0] ? tail : "no output");
        goto out;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
    {
        const cJSON *np = cJSON_GetObjectItemCaseSensitive(e, "n_prompt");
        const cJSON *ng = cJSON_GetObjectItemCaseSensitive(e, "n_gen");
        const cJSON *nd = cJSON_GetObjectItemCaseSensitive(e, "n_depth");
        const cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "avg_ts");
        const cJSON *commit = cJSON_GetObjectItemCaseSensitive(e, "build_commit");
        const cJSON *number = cJSON_GetObjectItemCaseSensitive(e, "build_number");
        if (!cJSON_IsNumber(np) || !cJSON_IsNumber(ng) || !cJSON_IsNumber(ts))
            continue;
        /* a build without -d has no n_depth: its runs are at depth 0 */
        const long at = cJSON_IsNumber(nd) ? (long)nd->valuedouble : 0;
        int k = 0;
        while (k < n_depth && depth[k] != at)
            k++;
        if (k == n_depth)
            continue;
        if (np->valuedouble > 0 && ng->valuedouble == 0)
            out->pp_tps[k] = ts->valuedouble;
        else if (np->valuedouble == 0 && ng->valuedouble > 0)
            out->tg_tps[k] = ts->valuedouble;
        if (cJSON_IsString(commit))
            snprintf(out->build, sizeof out->build, "b%d-%s",
                     cJSON_IsNumber(number) ? (int)number->valuedouble : 0, commit->valuestring);
    }
    rc = 0;
    for (int k = 0; k < n_depth && rc == 0; k++)
        if ((pp > 0 && out->pp_tps[k] <= 0) || (tg > 0 && out->tg_tps[k] <= 0)) {
            snprintf(why, why_len, "%s: no pp%ld/tg%ld result at depth %ld with avg_ts in its JSON",
                     path, pp, tg, depth[k]);
            rc = -1;
        }
out:
    cJSON_Delete(arr);
    free(json);
    free(err);
    return rc;
}
