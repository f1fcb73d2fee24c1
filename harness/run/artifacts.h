/* artifacts.h: finding model files and making their quant variants.
 *
 * A model in the matrix names where its file may be; this module finds it,
 * checks it (size, sha256), and derives each quant the matrix asks for:
 *
 *   source file   first that exists of: $<env> (the model's "env" key), its
 *                 "path" (relative to the matrix base), then the file name
 *                 (its "file", or the last part of path/url) in each folder
 *                 of $GT_MODEL_MIRROR (colon-separated) and the matrix's
 *                 "mirror" list, then <cache>/models/. Missing everywhere
 *                 and the model has a "url" (and "sha256"): downloaded into
 *                 <cache>/models/ by gt_fetch (fetch.h: resume, retries,
 *                 sha256 and size verified); GT_NO_FETCH=1 turns that off.
 *                 Still missing (no url, no sha256, the download failed or
 *                 did not verify): the cells are skipped with "artifact
 *                 missing" and the places tried or the fetch's error (a
 *                 wrong file names both hashes).
 *   quant         the source itself when the source already is that type
 *                 (most tensor elements in it); else
 *                 <cache>/quants/<source sha256>-<quant>.gguf, made once by
 *                 re-running this binary's `quantize` verb (so the type rules
 *                 live in one place) and reused by every later run.
 *   synthetic     <cache>/synth/<version>/<preset>-s<seed>-<quant>.gguf,
 *                 written by gt_synth_write; the f32 file is the "source".
 *
 * <cache> is --cache-dir, else $XDG_CACHE_HOME/gauntlet, else
 * ~/.cache/gauntlet. Results are memoized per model and per quant, so a run
 * hashes each file once. In dry-run mode (plan) nothing is written or
 * hashed: states say what would happen. */
#ifndef GT_ARTIFACTS_H
#define GT_ARTIFACTS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "gt/error.h"
#include "matrix.h"

typedef enum gt_art_state {
    GT_ART_OK,      /* path exists and is verified */
    GT_ART_MISSING, /* not found anywhere: cells skip */
    GT_ART_ERROR,   /* found but wrong (sha256/size), or making it failed: cells error */
    GT_ART_TO_MAKE, /* dry run: would be made */
    GT_ART_UNSUPPORTED, /* a valid file this runtime cannot run: cells skip. A tensor type
                           it lacks: "unsupported: tensor type N" (allowed by the gate
                           by default); a model it refuses (gt_model_load's
                           GT_MODEL_UNSUPPORTED): "unsupported model: ..." (not allowed
                           by default) */
} gt_art_state;

typedef struct gt_artifact {
    gt_art_state state;
    char path[PATH_MAX];
    char sha256[65];
    uint64_t size;
    char reason[1024]; /* for MISSING/ERROR; what happens, for TO_MAKE */
    const char *kind;  /* "model", "quant", "synth" */
    char arch[32];     /* general.architecture, once the file was looked at ("" before) */
} gt_artifact;

typedef struct gt_art_entry gt_art_entry;

typedef struct gt_artifacts {
    const gt_matrix *m;
    char cache_dir[PATH_MAX];
    char self_exe[PATH_MAX];
    bool dry_run;
    gt_art_entry **entries;
    int n_entries;
} gt_artifacts;

int gt_artifacts_init(gt_artifacts *a, const gt_matrix *m, const char *cache_dir, bool dry_run,
                      gt_err *err);
void gt_artifacts_free(gt_artifacts *a);

/* The model's source file (verified). */
const gt_artifact *gt_artifacts_source(gt_artifacts *a, const gt_mx_model *md);
/* The file a cell with this model and quant runs. */
const gt_artifact *gt_artifacts_quant(gt_artifacts *a, const gt_mx_model *md, const char *quant);

/* A row for the artifacts table (see db.h), or NULL when not OK. */
cJSON *gt_artifact_json(const gt_artifact *art, const char *model, const char *quant,
                        const char *source_sha256);

/* The default cache folder (no trailing slash). */
void gt_artifacts_default_cache(char *out, size_t cap);

#endif
