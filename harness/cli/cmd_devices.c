/* cmd_devices.c: `gauntlet devices [--json] [--driver D]`: every backend the
 * registry knows, with the devices its probe reports (name, kind, memory,
 * driver and version, backend-specific facts), or why it is unavailable.
 * The JSON form (cJSON) is what the runner records in the devices table;
 * the text form is for people. Exit 0 even when some backend is missing:
 * a missing backend is information, not an error. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "commands.h"

#define MAX_DEVS 16

static void help(FILE *f)
{
    fprintf(f,
            "usage: gauntlet devices [--json] [--driver D]\n"
            "  lists every backend (built in and plugins) and the devices it finds\n"
            "      --json       machine-readable output\n"
            "      --driver D   driver profile setting passed to every probe,\n"
            "                   e.g. blas=/usr/lib/x86_64-linux-gnu/blas/libblas.so.3\n");
}

static void human_bytes(uint64_t b, char *out, size_t n)
{
    if (!b)
        snprintf(out, n, "unknown");
    else if (b >= (1ull << 30))
        snprintf(out, n, "%.1f GiB", (double)b / (1ull << 30));
    else
        snprintf(out, n, "%.1f MiB", (double)b / (1ull << 20));
}

static cJSON *device_json(const gt_device_info *d, int index)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "index", index);
    cJSON_AddStringToObject(o, "name", d->name);
    cJSON_AddStringToObject(o, "kind", d->kind);
    cJSON_AddNumberToObject(o, "memory", (double)d->memory);
    cJSON_AddStringToObject(o, "driver", d->driver);
    cJSON_AddStringToObject(o, "driver_version", d->driver_version);
    cJSON_AddStringToObject(o, "extra", d->extra);
    return o;
}

int cmd_devices(int argc, char **argv)
{
    bool json = false;
    const char *driver = NULL;
    enum { O_JSON = 256, O_DRIVER };
    static const struct option opts[] = {{"json", no_argument, 0, O_JSON},
                                         {"driver", required_argument, 0, O_DRIVER},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case O_JSON: json = true; break;
        case O_DRIVER: driver = optarg; break;
        case 'h': help(stdout); return GT_EXIT_OK;
        default: help(stderr); return GT_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gauntlet devices: unexpected argument '%s'\n", argv[optind]);
        return GT_EXIT_USAGE;
    }

    const gt_backend_entry *e;
    const int n = gt_backend_registry(&e);
    cJSON *root = json ? cJSON_CreateArray() : NULL;
    if (json && !root) {
        fprintf(stderr, "gauntlet devices: out of memory\n");
        return GT_EXIT_FAIL;
    }
    for (int i = 0; i < n; i++) {
        gt_device_info devs[MAX_DEVS];
        gt_err err = {{0}};
        int nd = 0;
        char why[1100] = "";
        if (!e[i].reg) {
            snprintf(why, sizeof why, "%s", e[i].why);
        } else {
            memset(devs, 0, sizeof devs);
            nd = e[i].reg->probe(devs, MAX_DEVS, driver, &err);
            if (nd <= 0)
                snprintf(why, sizeof why, "%s", err.msg[0] ? err.msg : "no devices found");
            if (nd > MAX_DEVS)
                nd = MAX_DEVS;
        }
        if (json) {
            cJSON *b = cJSON_CreateObject();
            if (!b)
                break;
            cJSON_AddItemToArray(root, b);
            cJSON_AddStringToObject(b, "backend", e[i].name);
            if (e[i].reg)
                cJSON_AddStringToObject(b, "description", e[i].reg->description);
            cJSON_AddBoolToObject(b, "available", nd > 0);
            if (nd <= 0)
                cJSON_AddStringToObject(b, "reason", why);
            cJSON *arr = cJSON_AddArrayToObject(b, "devices");
            for (int d = 0; d < nd && arr; d++)
                cJSON_AddItemToArray(arr, device_json(&devs[d], d));
            continue;
        }
        if (nd <= 0) {
            printf("%-10s not available: %s\n", e[i].name, why);
            continue;
        }
        printf("%-10s %s\n", e[i].name, e[i].reg->description);
        for (int d = 0; d < nd; d++) {
            char mem[32];
            human_bytes(devs[d].memory, mem, sizeof mem);
            printf("  [%d] %s (%s, %s memory)\n", d, devs[d].name, devs[d].kind, mem);
            printf("      driver: %s %s\n", devs[d].driver, devs[d].driver_version);
            if (devs[d].extra[0])
                printf("      %s\n", devs[d].extra);
        }
    }
    if (json) {
        char *s = cJSON_Print(root);
        if (s)
            printf("%s\n", s);
        free(s);
        cJSON_Delete(root);
        if (!s) {
            fprintf(stderr, "gauntlet devices: out of memory\n");
            return GT_EXIT_FAIL;
        }
    }
    return GT_EXIT_OK;
}
