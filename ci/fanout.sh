#!/usr/bin/env bash
# ci/fanout.sh: the CI fan-out, locally. Runs a matrix as 2 shards in
# parallel (ci/qualify.sh --shard I/2, one run id), merges them with
# `ci/qualify.sh merge` (gauntlet merge + report + db gate), runs the same
# matrix unsharded, and checks that the two agree: the same cells with the
# same statuses and raw statuses, every cell finished, one run in the merged
# database, the same gate exit code, a merge missing a shard failing, and
# the reports written (JUnit checked against ../shared/schemas/junit.xsd
# when xmllint is there).
#
# usage: ci/fanout.sh [MATRIX]   (default matrices/quickstart.json)
#   env: GAUNTLET (build/gauntlet), GT_FANOUT_DIR (kept; default a temp dir
#        removed on success)
# exit: 0 agree, 1 they differ, 2 could not run
set -uo pipefail
cd "$(dirname "$0")/.."
MATRIX=${1:-matrices/quickstart.json}
export GAUNTLET=${GAUNTLET:-build/gauntlet}
command -v sqlite3 >/dev/null || { echo "ci/fanout.sh: SKIP: no sqlite3 CLI"; exit 77; }
[ -x "$GAUNTLET" ] || { echo "ci/fanout.sh: $GAUNTLET not built" >&2; exit 2; }
T=${GT_FANOUT_DIR:-$(mktemp -d)}
mkdir -p "$T"
unset GT_SHARD GT_BASELINE GT_TIER GT_OUT
export GT_MATRIX=$MATRIX GT_JOBS=1

# Each shard has its own artifact cache: on CI they are separate machines,
# and here two processes must not race to synthesise the same file.
t0=$(date +%s)
GT_RUN_ID=fanout-$$ GT_CACHE_DIR=$T/cache1 bash ci/qualify.sh --shard 1/2 --out "$T/s1" >"$T/s1.log" 2>&1 &
p1=$!
GT_RUN_ID=fanout-$$ GT_CACHE_DIR=$T/cache2 bash ci/qualify.sh --shard 2/2 --out "$T/s2" >"$T/s2.log" 2>&1 &
p2=$!
wait $p1; r1=$?
wait $p2; r2=$?
for r in $r1 $r2; do
  [ "$r" -le 1 ] || { echo "ci/fanout.sh: a shard could not run:"; cat "$T"/s?.log; exit 2; }
done
bash ci/qualify.sh merge --out "$T/merged" "$T"/s1/results-1-of-2.sqlite "$T"/s2/results-2-of-2.sqlite \
  >"$T/merge.log" 2>&1
rm=$?
t1=$(date +%s)
GT_RUN_ID=fanout-full-$$ GT_CACHE_DIR=$T/cache1 GT_JOBS=2 bash ci/qualify.sh --out "$T/full" >"$T/full.log" 2>&1
rf=$?
t2=$(date +%s)
[ "$rm" -le 1 ] && [ "$rf" -le 1 ] || { echo "ci/fanout.sh: merge exit $rm, unsharded exit $rf"; cat "$T/merge.log" "$T/full.log"; exit 2; }

fail=0
q() { sqlite3 -batch -noheader "$1" "$2"; }
cells="SELECT cell_id, status, raw_status FROM cells ORDER BY cell_id"
q "$T/merged/results.sqlite" "$cells" >"$T/merged.cells"
q "$T/full/results.sqlite" "$cells" >"$T/full.cells"
if ! diff -u "$T/full.cells" "$T/merged.cells" >"$T/cells.diff"; then
  echo "ci/fanout.sh: merged shards differ from the unsharded run (- unsharded, + merged):"
  cat "$T/cells.diff"; fail=1
fi
n=$(wc -l <"$T/full.cells")
[ "$n" -gt 0 ] || { echo "ci/fanout.sh: the unsharded run has no cells"; fail=1; }
# Both shards ran something, or the split proved nothing.
for s in 1 2; do
  k=$(q "$T/s$s/results-$s-of-2.sqlite" "SELECT count(*) FROM cells WHERE status != 'pending'")
  [ "$k" -gt 0 ] || { echo "ci/fanout.sh: shard $s/2 finished no cell"; fail=1; }
done
runs=$(q "$T/merged/results.sqlite" "SELECT count(*) FROM runs")
pend=$(q "$T/merged/results.sqlite" "SELECT count(*) FROM cells WHERE status = 'pending'")
want=$(q "$T/merged/results.sqlite" "SELECT n_cells FROM runs")
[ "$runs" = 1 ] || { echo "ci/fanout.sh: merged database has $runs runs, want 1"; fail=1; }
[ "$pend" = 0 ] || { echo "ci/fanout.sh: $pend cells still pending after the merge"; fail=1; }
[ "$want" = "$n" ] || { echo "ci/fanout.sh: run says $want cells, $n recorded"; fail=1; }
[ "$rm" = "$rf" ] || { echo "ci/fanout.sh: gate exit $rm merged, $rf unsharded"; fail=1; }
for f in report.html junit.xml summary.md; do
  [ -s "$T/merged/$f" ] || { echo "ci/fanout.sh: merge job wrote no $f"; fail=1; }
done
# The merge job must not pass a run that lost a shard.
bash ci/qualify.sh merge --out "$T/partial" "$T"/s1/results-1-of-2.sqlite >"$T/partial.log" 2>&1
rp=$?
[ "$rp" = 1 ] || { echo "ci/fanout.sh: merging shard 1 alone exited $rp, want 1 (missing shard)"; fail=1; }
xsd=../shared/schemas/junit.xsd
if command -v xmllint >/dev/null && [ -f "$xsd" ]; then
  xmllint --noout --schema "$xsd" "$T/merged/junit.xml" 2>"$T/xmllint.txt" ||
    { echo "ci/fanout.sh: merged junit.xml fails junit.xsd:"; head -5 "$T/xmllint.txt"; fail=1; }
fi
echo "ci/fanout.sh: $n cells; shards+merge $((t1 - t0)) s, unsharded $((t2 - t1)) s; gate $rm/$rf;" \
     "$([ $fail = 0 ] && echo agree || echo DIFFER) (outputs: $T)"
[ $fail = 0 ] && [ -z "${GT_FANOUT_DIR:-}" ] && rm -rf "$T"
exit $fail
