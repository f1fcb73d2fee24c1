/* opencl_cache.c: the on-disk cache of built program binaries.
 *
 * Building the kernels from source takes PoCL a few seconds (it runs clang
 * and LLVM), which every gauntlet cell would pay. So the binary of a built
 * program is stored, keyed by everything that could make it wrong: platform
 * name and version, device name, driver version, build options and a hash
 * of the kernel sources. The file name is a hash of that key, and the file
 * repeats the full key, so a hash collision or a stale entry is noticed and
 * simply rebuilt.
 *
 * Trust nothing read back: the entry's size, key and a checksum of the
 * binary are checked before a driver ever sees the bytes (a driver handed
 * garbage may crash rather than return CL_INVALID_BINARY). Writes go to a
 * temporary file in the same folder and are renamed into place, so a reader
 * running concurrently (parallel test jobs, the runner's children) sees the
 * old entry, the new one, or none, never half of one.
 *
 * Where: $GT_OPENCL_CACHE if set ("off" disables caching), else
 * $XDG_CACHE_HOME/gauntlet/opencl, else ~/.cache/gauntlet/opencl. */
#include "opencl_cache.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "GTOCLBN1"
#define MAX_BINARY ((uint64_t)1 << 30)

typedef struct entry_header {
    char magic[8];
    uint32_t key_len;
    uint32_t reserved;
    uint64_t bin_len;
    uint64_t bin_hash;
    uint64_t key_hash;
} entry_header;

uint64_t gt_ocl_fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    if (h == 0)
        h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

void gt_ocl_cache_dir(char *out, size_t cap)
{
    const char *env = getenv("GT_OPENCL_CACHE");
    out[0] = '\0';
    if (env) {
        if (env[0] && strcasecmp(env, "off") != 0 && strcmp(env, "0") != 0)
            snprintf(out, cap, "%s", env);
        return;
    }
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (xdg && xdg[0])
        snprintf(out, cap, "%s/gauntlet/opencl", xdg);
    else if (home && home[0])
        snprintf(out, cap, "%s/.cache/gauntlet/opencl", home);
}

/* mkdir -p */
static int make_dirs(const char *dir)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return -1;
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(path, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

void gt_ocl_cache_path(const char *dir, const char *key, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%016llx.clbin", dir,
             (unsigned long long)gt_ocl_fnv1a(0, key, strlen(key)));
}

int gt_ocl_cache_load(const char *dir, const char *key, unsigned char **bin, size_t *len,
                      char *why, size_t why_len)
{
    char path[4200];
    gt_ocl_cache_path(dir, key, path, sizeof path);
    *bin = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, why_len, "no entry");
        return -1;
    }
    const size_t key_len = strlen(key);
    entry_header h;
    struct stat st;
    char *stored_key = NULL;
    unsigned char *data = NULL;
    const char *bad = NULL;
    if (fstat(fileno(f), &st) != 0 || fread(&h, sizeof h, 1, f) != 1)
        bad = "corrupt (short header)";
    else if (memcmp(h.magic, MAGIC, sizeof h.magic) != 0)
        bad = "corrupt (bad magic)";
    else if (h.key_len != key_len || h.key_hash != gt_ocl_fnv1a(0, key, key_len))
        bad = "stale (built for another key)";
    else if (h.bin_len == 0 || h.bin_len > MAX_BINARY ||
             (uint64_t)st.st_size != sizeof h + h.key_len + h.bin_len)
        bad = "corrupt (size does not match its header)";
    else if (!(stored_key = malloc(key_len + 1)) || !(data = malloc((size_t)h.bin_len)))
        bad = "out of memory";
    else if (fread(stored_key, 1, key_len, f) != key_len || memcmp(stored_key, key, key_len) != 0)
        bad = "stale (built for another key)";
    else if (fread(data, 1, (size_t)h.bin_len, f) != h.bin_len)
        bad = "corrupt (short binary)";
    else if (gt_ocl_fnv1a(0, data, (size_t)h.bin_len) != h.bin_hash)
        bad = "corrupt (checksum mismatch)";
    fclose(f);
    free(stored_key);
    if (bad) {
        free(data);
        snprintf(why, why_len, "%s", bad);
        return -1;
    }
    *bin = data;
    *len = (size_t)h.bin_len;
    return 0;
}

int gt_ocl_cache_store(const char *dir, const char *key, const unsigned char *bin, size_t len,
                       char *why, size_t why_len)
{
    if (make_dirs(dir) != 0) {
        snprintf(why, why_len, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    char path[4200], tmp[4300];
    gt_ocl_cache_path(dir, key, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        snprintf(why, why_len, "cannot create a file in %s: %s", dir, strerror(errno));
        return -1;
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        unlink(tmp);
        snprintf(why, why_len, "fdopen: %s", strerror(errno));
        return -1;
    }
    entry_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MAGIC, sizeof h.magic);
    h.key_len = (uint32_t)strlen(key);
    h.bin_len = len;
    h.bin_hash = gt_ocl_fnv1a(0, bin, len);
    h.key_hash = gt_ocl_fnv1a(0, key, h.key_len);
    bool ok = fwrite(&h, sizeof h, 1, f) == 1 && fwrite(key, 1, h.key_len, f) == h.key_len &&
              fwrite(bin, 1, len, f) == len;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        snprintf(why, why_len, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}
