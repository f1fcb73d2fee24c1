/* backend_table.h: the table the build generates (backends/CMakeLists.txt
 * writes backends_builtin.c into the build folder): the built-in backends'
 * entry functions, in listing order, and the plugin names to look for. The
 * registry reads it; nothing in runtime/ names a backend. */
#ifndef GT_BACKEND_TABLE_H
#define GT_BACKEND_TABLE_H

#include "gt/backend.h"

typedef struct gt_backend_builtin {
    const char *name;
    gt_backend_plugin_entry_fn entry; /* the plugins' entry signature */
} gt_backend_builtin;

extern const gt_backend_builtin gt_backend_builtins[]; /* ends with {NULL, NULL} */
extern const char *const gt_backend_plugins[];         /* ends with NULL */

#endif
