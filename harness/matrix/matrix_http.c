/* matrix_http.c: an "http" backend entry of a matrix (an OpenAI-compatible
 * server, started by the harness or already running): its keys, the
 * {placeholders} of its endpoint, health URL and start command, and the
 * rules that tie them together (see matrices/README.md, "HTTP targets"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/backend.h"
#include "base.h"
#include "matrix.h"
#include "matrix_parse.h"

#define OOM(v) gt_jv_fail((v), "", "out of memory")

/* Placeholders "{name}" in a template: each must be one of known (a
 * NULL-terminated list); with uses, *uses is set when "{port}" occurs.
 * A brace not followed by a lower-case name and "}" is literal text. */
static int placeholders(const gt_jv *v, const char *path, const char *s,
                        const char *const *known, bool *uses_port)
{
    for (const char *p = strchr(s, '{'); p; p = strchr(p + 1, '{')) {
        size_t n = strspn(p + 1, "abcdefghijklmnopqrstuvwxyz_");
        if (n == 0 || p[1 + n] != '}')
            continue;
        bool ok = false;
        for (int i = 0; known[i] && !ok; i++)
            ok = strlen(known[i]) == n && strncmp(known[i], p + 1, n) == 0;
        if (!ok) {
            char names[128] = "";
            for (int i = 0; known[i]; i++) {
                size_t len = strlen(names);
                snprintf(names + len, sizeof names - len, "%s{%s}", i ? ", " : "", known[i]);
            }
            return gt_jv_fail(v, path, "unknown placeholder {%.*s} (known here: %s)", (int)n,
                              p + 1, names);
        }
        if (uses_port && n == 4 && strncmp(p + 1, "port", 4) == 0)
            *uses_port = true;
    }
    return 0;
}

/* "http://HOST[:PORT][/PATH]" with a non-empty host; *origin_len gets the
 * length of "http://HOST[:PORT]". */
static int http_url(const gt_jv *v, const char *path, const char *url, size_t *origin_len)
{
    if (strncmp(url, "http://", 7) != 0)
        return gt_jv_fail(v, path, "expected an http:// URL%s, got \"%s\"",
                          strncmp(url, "https://", 8) == 0 ? " (https is not supported: the "
                                                             "harness talks to local servers)"
                                                           : "",
                          url);
    size_t host = strcspn(url + 7, "/?#");
    if (host == 0 || url[7] == ':')
        return gt_jv_fail(v, path, "expected a host after http://, got \"%s\"", url);
    if (strpbrk(url, " \t\r\n"))
        return gt_jv_fail(v, path, "a URL has no white space, got \"%s\"", url);
    if (origin_len)
        *origin_len = 7 + host;
    return 0;
}

/* {"backend": "http", "id": ..., "endpoint": ..., "start": [...], ...} */
int gt_matrix_parse_http(const gt_jv *v, const cJSON *node, const char *path, gt_mx_backend *b)
{
    static const char *const KEYS[] = {"id",        "backend",   "endpoint",  "start",
                                       "model",     "health",    "start_timeout_s",
                                       "threads",   "timeout_s", "memory_mb", "description",
                                       "api",       NULL};
    static const char *const URL_PH[] = {"port", NULL};
    static const char *const START_PH[] = {"gauntlet", "model_path", "port", "threads", "root",
                                           NULL};
    char p[GT_JV_PATH], q[GT_JV_PATH];
    const char *kind = NULL, *health = NULL, *desc = NULL;
    int64_t threads = -1;
    b->is_http = true;
    b->http.start_timeout_s = 60;
    if (gt_jv_object(v, node, path, KEYS) || gt_jv_ident(v, node, path, "id", b->id) ||
        gt_jv_str(v, node, path, "backend", true, &kind) ||
        gt_jv_str(v, node, path, "endpoint", true, &b->http.endpoint) ||
        gt_jv_arr(v, node, path, "start", false, true, &b->http.start) ||
        gt_jv_str(v, node, path, "model", false, &b->http.model) ||
        gt_jv_str(v, node, path, "health", false, &health) ||
        gt_jv_num(v, node, path, "start_timeout_s", false, 0.1, 3600, &b->http.start_timeout_s) ||
        gt_jv_int(v, node, path, "threads", false, 0, 1024, &threads) ||
        gt_jv_num(v, node, path, "timeout_s", false, 0.001, 1e6, &b->timeout_s) ||
        gt_jv_int(v, node, path, "memory_mb", false, 0, INT64_MAX / 2, &b->memory_mb) ||
        gt_jv_str(v, node, path, "description", false, &desc) ||
        gt_jv_str(v, node, path, "api", false, &b->http.api))
        return -1;
    b->threads = (int)threads;
    if (b->http.api && strcmp(b->http.api, "completions") != 0 && strcmp(b->http.api, "chat") != 0)
        return gt_jv_fail(v, gt_jv_key(p, path, "api"),
                          "expected \"completions\" (POST {endpoint}/completions, the default) or "
                          "\"chat\" (POST {endpoint}/chat/completions), got \"%s\"",
                          b->http.api);
    if (strcmp(kind, "http") != 0)
        return gt_jv_fail(v, gt_jv_key(p, path, "backend"),
                          "expected \"http\" (a built-in backend is named by \"id\" alone), "
                          "got \"%s\"",
                          kind);
    if (gt_backend_find(b->id))
        return gt_jv_fail(v, gt_jv_key(p, path, "id"),
                          "\"%s\" is a built-in backend's name; give the server entry its own "
                          "id (e.g. \"serve-%s\")",
                          b->id, b->id);

    bool endpoint_port = false, start_port = false, health_port = false;
    size_t origin = 0;
    gt_jv_key(p, path, "endpoint");
    if (http_url(v, p, b->http.endpoint, &origin) ||
        placeholders(v, p, b->http.endpoint, URL_PH, &endpoint_port))
        return -1;
    if (health) {
        gt_jv_key(q, path, "health");
        if (health[0] == '/') {
            if (placeholders(v, q, health, URL_PH, &health_port))
                return -1;
            snprintf(b->http.health, sizeof b->http.health, "%.*s%s", (int)origin,
                     b->http.endpoint, health);
        } else if (http_url(v, q, health, NULL) == 0) {
            if (placeholders(v, q, health, URL_PH, &health_port))
                return -1;
            snprintf(b->http.health, sizeof b->http.health, "%s", health);
        } else {
            return gt_jv_fail(v, q, "expected a path (\"/health\") or an http:// URL, got "
                                    "\"%s\"",
                              health);
        }
    } else {
        snprintf(b->http.health, sizeof b->http.health, "%.*s/health", (int)origin,
                 b->http.endpoint);
    }

    if (health_port && !endpoint_port)
        return gt_jv_fail(v, gt_jv_key(p, path, "health"),
                          "uses {port} but \"endpoint\" does not: both name the same server");
    if (b->http.start) {
        gt_jv_key(q, path, "start");
        int i = 0;
        for (const cJSON *a = b->http.start->child; a; a = a->next, i++) {
            gt_jv_index(p, q, i);
            if (!cJSON_IsString(a) || (i == 0 && !a->valuestring[0]))
                return gt_jv_fail(v, p, "expected %s, got %s",
                                  i == 0 ? "the program to run (a non-empty string)" : "a string",
                                  gt_jv_type_name(a));
            if (placeholders(v, p, a->valuestring, START_PH, &start_port))
                return -1;
            if (start_port && !endpoint_port)
                return gt_jv_fail(v, p, "uses {port} but \"endpoint\" does not: the harness "
                                        "would wait for a server where it does not listen");
        }
        if (endpoint_port && !start_port)
            return gt_jv_fail(v, q, "\"endpoint\" uses {port} but the command does not pass "
                                    "it to the server (e.g. \"--port\", \"{port}\")");
    } else if (endpoint_port || health_port) {
        return gt_jv_fail(v, gt_jv_key(p, path, endpoint_port ? "endpoint" : "health"),
                          "{port} is the port the harness picks for a server it starts; it needs "
                          "a \"start\" command");
    }
    b->drivers = calloc(1, sizeof *b->drivers);
    if (!b->drivers)
        return OOM(v);
    b->n_drivers = 1;
    snprintf(b->drivers[0].id, sizeof b->drivers[0].id, "default");
    return 0;
}
