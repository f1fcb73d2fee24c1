/* cmd_merge.c: `gauntlet merge OUT IN...`: fold shard or host databases into one.
 *
 * OUT is created if needed (it may also be one of the inputs' copies); each
 * IN is merged in its own transaction (see gt_db_merge for identity rules),
 * so an error leaves OUT with the inputs before it merged and nothing of the
 * failing one. Merging the same input twice adds nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "store.h"

int cmd_merge(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: gauntlet merge OUT IN...\n"
               "  merges results databases (shards of one run, runs from several hosts) into\n"
               "  OUT. Runs are matched by run key and cells by cell id: shards of one run\n"
               "  (same --run-id / GT_RUN_ID) become one run; nothing is duplicated.\n");
        return GT_EXIT_OK;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: gauntlet merge OUT IN...\n");
        return GT_EXIT_USAGE;
    }
    gt_err err = {{0}};
    gt_db *out;
    if (gt_db_open(argv[1], false, &out, &err) != 0) {
        fprintf(stderr, "gauntlet merge: %s\n", err.msg);
        return GT_EXIT_USAGE;
    }
    int rc = GT_EXIT_OK;
    for (int i = 2; i < argc; i++) {
        gt_db_merge_stats st;
        if (gt_db_merge(out, argv[i], &st, &err) != 0) {
            fprintf(stderr, "gauntlet merge: %s\n", err.msg);
            rc = GT_EXIT_USAGE;
            break;
        }
        printf("%s: %d runs added, %d merged; cells: %d added, %d replaced pending, %d kept%s",
               argv[i], st.runs_added, st.runs_merged, st.cells_added, st.cells_replaced,
               st.cells_kept, st.conflicts ? "" : "\n");
        if (st.conflicts)
            printf("\nCONFLICT: %d cells finished in both with different statuses: marked fail"
                   " (\"" GT_MERGE_CONFLICT "...\"); `gauntlet db check %s` lists them\n",
                   st.conflicts, argv[1]);
    }
    gt_db_close(out);
    return rc;
}
