/* refkey.c: see refkey.h. */
#include "refkey.h"

#include <stdio.h>
#include <string.h>

#include "base.h"

void gt_ref_key(const char *kind, const char *model_sha256, const char *quant,
                const char *data_hash, const char *settings, const char *tool_version,
                int numerics_version, char key[65])
{
    char numerics[24];
    snprintf(numerics, sizeof numerics, "numerics=%d", numerics_version);
    /* NUL separators keep ("ab","c") and ("a","bc") apart. */
    const char *parts[] = {"gauntlet-ref-v2", kind, model_sha256 ? model_sha256 : "",
                           quant ? quant : "", data_hash ? data_hash : "",
                           settings ? settings : "", tool_version ? tool_version : "",
                           numerics};
    gt_sha256 s;
    gt_sha256_init(&s);
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        gt_sha256_update(&s, parts[i], strlen(parts[i]) + 1);
    gt_sha256_final_hex(&s, key);
}
