/* store.h: the face of harness/store: the results database (db.h: schema,
 * recording cells, merging shards, checking a database) and the release
 * gate that judges a recorded run (gate.h).
 *
 * May use: base, matrix (the gate reads the matrix's policy), SQLite. */
#ifndef GT_STORE_H
#define GT_STORE_H

#include "db.h"
#include "gate.h"

#endif
