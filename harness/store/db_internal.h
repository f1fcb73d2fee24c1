/* db_internal.h: what db.c shares with db_record.c, db_check.c and
 * db_merge.c; not for the rest of the harness (use db.h). */
#ifndef GT_DB_INTERNAL_H
#define GT_DB_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include <sqlite3.h>

#include "db.h"

struct gt_db {
    sqlite3 *h;
    char *path;
    bool readonly;
};

/* Fills err with "PATH: what: sqlite message"; returns -1. */
int gt_dbi_sqlerr(gt_db *db, gt_err *err, const char *what);
/* Binds NULL for a NULL string. */
void gt_dbi_bind_text(sqlite3_stmt *st, int i, const char *s);
void gt_dbi_col_copy(sqlite3_stmt *st, int i, char *out, size_t cap);
void gt_dbi_host(char *out, size_t cap);
/* Migration i (0-based: the SQL that takes user_version i to i+1), or NULL. */
const char *gt_dbi_migration(int i);

#endif
