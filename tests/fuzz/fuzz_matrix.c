/* fuzz_matrix.c: libFuzzer target for the matrix parser (harness/matrix/matrix.c)
 * and what runs on a matrix that parsed: tier lookup, cell expansion, rule
 * matching, path resolution and driver version constraints.
 *
 * gt_matrix_parse takes the bytes directly (not NUL-terminated: the fuzzer's
 * buffer is exactly `size` long, so an over-read past the text is an ASan
 * report). A parse failure must come with a message, because the promise to
 * users is "errors with file:line-ish context, never ignored". */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "matrix.h"

/* Expansion is a product of axes: cap it so a fuzzer-made matrix with
 * thousands of entries per axis measures parsing, not memory. */
#define MAX_INPUT (64 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT)
        return 0;
    gt_err err;
    err.msg[0] = '\0';
    gt_matrix *m = NULL;
    if (gt_matrix_parse("fuzz.json", (const char *)data, size, &m, &err) != 0) {
        if (err.msg[0] == '\0')
            __builtin_trap();
    } else {
        for (int t = -1; t < m->n_tiers; t++) {
            const gt_mx_tier *tier = gt_matrix_tier(m, t < 0 ? NULL : m->tiers[t].name, &err);
            if (!tier)
                continue;
            gt_cell *cells = NULL;
            int n = 0;
            if (gt_matrix_expand(m, tier, &cells, &n, &err) != 0)
                continue;
            for (int i = 0; i < n && i < 256; i++) {
                if (strlen(cells[i].id) >= GT_CELL_ID_MAX)
                    __builtin_trap();
                for (int r = 0; r < tier->gate.n_required; r++)
                    gt_rule_match(&tier->gate.required[r], cells[i].id);
                for (int r = 0; r < tier->gate.n_optional; r++)
                    gt_rule_match(&tier->gate.optional[r], cells[i].id);
            }
            gt_cells_free(cells, n);
        }
        char path[4096];
        for (int i = 0; i < m->n_models; i++)
            if (m->models[i].path)
                gt_matrix_resolve(m, m->models[i].path, path, sizeof path);
        gt_matrix_free(m);
    }
    /* The same bytes as a driver constraint ("driver>=12.4,cc>=8.0"). */
    char c[128];
    size_t n = size < sizeof c - 1 ? size : sizeof c - 1;
    memcpy(c, data, n);
    c[n] = '\0';
    if (gt_version_constraint_valid(c)) {
        gt_version_satisfies("12.4.1", c);
        gt_version_satisfies("", c);
    }
    gt_version_satisfies(c, ">=1.2");
    return 0;
}
