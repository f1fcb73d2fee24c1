/* replay.c: runs a fuzz target's LLVMFuzzerTestOneInput over files, without
 * libFuzzer, so every compiler builds the targets and CTest replays the kept
 * crash inputs (tests/fuzz/regressions/<target>/) and the seed corpus
 * (tests/fuzz/corpus/<target>/) in the normal and the sanitizer builds.
 *
 * usage: replay_<target> FILE-OR-DIR...   (exit 0 all ran; 77 = skip, from
 * a target whose data is missing; a crash is the test failing). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int n_run;

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    /* Exactly n bytes on the heap, as libFuzzer passes them, so an
     * over-read is caught under ASan here too. */
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
        fprintf(stderr, "%s: cannot read\n", path);
        fclose(f);
        free(buf);
        return -1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    n_run++;
    return 0;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode))
        return run_file(path);
    DIR *d = opendir(path);
    if (!d) {
        perror(path);
        return -1;
    }
    /* Sorted, so a failure names the same file on every machine. */
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, cap * sizeof *names);
            if (!nn)
                break;
            names = nn;
        }
        size_t len = strlen(path) + strlen(e->d_name) + 2;
        names[n] = malloc(len);
        if (names[n])
            snprintf(names[n++], len, "%s/%s", path, e->d_name);
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, cmp);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (run_path(names[i]) != 0)
            rc = -1;
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE-OR-DIR...\n", argv[0]);
        return 2;
    }
    int rc = 0;
    for (int i = 1; i < argc; i++)
        if (run_path(argv[i]) != 0)
            rc = 1;
    printf("%s: %d inputs replayed\n", argv[0], n_run);
    return rc;
}
