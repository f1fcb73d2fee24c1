#!/usr/bin/env bash
# ci/fanout.sh: the CI fan-out, locally, as ci/workflows/*.yml lay it out:
# two "hardware runners" (--backends reference,cpu and the matrix's other
# backends) x 2 shards, four ci/qualify.sh jobs in parallel with one run
# id, merged with `ci/qualify.sh merge` (gauntlet merge + report + db gate);
# then the same matrix unsharded. Checks that the two agree: the same cells
# with the same statuses and raw statuses, every cell finished exactly once
# (no runner duplicates another's cells), one run in the merged database,
# the same gate exit code, a merge missing a job's database failing, and
# the reports written (JUnit checked against ../shared/schemas/junit.xsd
# when xmllint is there).
#
# usage: ci/fanout.sh [MATRIX]   (default matrices/quickstart.json)
#   env: GAUNTLET (build/gauntlet), GT_FANOUT_DIR (kept; default a temp dir
#        /tmp/gt-fanout.*, removed on exit, pass or fail), GT_FANOUT_SERIAL=1 (the four jobs one after
#        another), GT_FANOUT_TIER (the tier; default smoke)
# exit: 0 agree, 1 they differ, 2 could not run
set -uo pipefail
cd "$(dirname "$0")/.."
MATRIX=${1:-matrices/quickstart.json}
export GAUNTLET=${GAUNTLET:-build/gauntlet}
command -v sqlite3 >/dev/null || { echo "ci/fanout.sh: SKIP: no sqlite3 CLI"; exit 77; }
[ -x "$GAUNTLET" ] || { echo "ci/fanout.sh: $GAUNTLET not built" >&2; exit 2; }
if [ -n "${GT_FANOUT_DIR:-}" ]; then
  T=$GT_FANOUT_DIR
else
  T=$(mktemp -d /tmp/gt-fanout.XXXXXX)
  trap 'rm -rf "$T"' EXIT
  trap 'exit 143' TERM INT
fi
mkdir -p "$T"
unset GT_SHARD GT_BASELINE GT_OUT
# The quickstart's smoke tier: sharding and merging are what is checked
# here, not the main job's accuracy and performance (its own step runs them).
export GT_MATRIX=$MATRIX GT_JOBS=1 GT_TIER=${GT_FANOUT_TIER:-smoke}

# The matrix's backend ids, split into the two runner classes.
mapfile -t ids < <(python3 -c 'import json,sys
for b in json.load(open(sys.argv[1]))["backends"]:
    print(b if isinstance(b, str) else b["id"])' "$MATRIX")
rest=$(printf '%s\n' "${ids[@]}" | grep -vxE 'reference|cpu' | paste -sd, -)
[ -n "$rest" ] || { echo "ci/fanout.sh: $MATRIX has no backend besides reference and cpu" >&2; exit 2; }
classes=("reference,cpu" "$rest")

# Each job has its own artifact cache: on CI they are separate machines,
# and here parallel processes must not race to synthesise the same file.
t0=$(date +%s)
pids=() jobs=()
for c in 0 1; do
  for s in 1 2; do
    j=r$c-s$s
    GT_RUN_ID=fanout-$$ GT_CACHE_DIR=$T/cache-$j GT_BACKENDS=${classes[$c]} \
      bash ci/qualify.sh --shard $s/2 --out "$T/$j" >"$T/$j.log" 2>&1 &
    pids+=($!) jobs+=("$j")
    # Sanitized builds run 3-5x slower: four jobs at once on 2 cores then
    # time cells out, which says nothing about sharding; one at a time.
    [ "${GT_FANOUT_SERIAL:-0}" = 1 ] && wait "$!"
  done
done
parts=()
for k in "${!pids[@]}"; do
  wait "${pids[$k]}"; r=$?
  [ "$r" -le 1 ] || { echo "ci/fanout.sh: job ${jobs[$k]} could not run (exit $r):"; cat "$T/${jobs[$k]}.log"; exit 2; }
  parts+=("$T/${jobs[$k]}"/results-*-of-2.sqlite)
done
bash ci/qualify.sh merge --out "$T/merged" "${parts[@]}" >"$T/merge.log" 2>&1
rm=$?
t1=$(date +%s)
GT_RUN_ID=fanout-full-$$ GT_CACHE_DIR=$T/cache-r0-s1 GT_JOBS=2 bash ci/qualify.sh --out "$T/full" >"$T/full.log" 2>&1
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
# Every job ran something, or the split proved nothing; together they ran
# each cell once.
total=0
for j in "${jobs[@]}"; do
  k=$(q "$T/$j"/results-*-of-2.sqlite "SELECT count(*) FROM cells WHERE status != 'pending'")
  [ "$k" -gt 0 ] || { echo "ci/fanout.sh: job $j finished no cell"; fail=1; }
  total=$((total + k))
done
[ "$total" = "$n" ] || { echo "ci/fanout.sh: the jobs finished $total cells, the matrix has $n"; fail=1; }
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
# The merge job must not pass a run that lost a job's database.
bash ci/qualify.sh merge --out "$T/partial" "${parts[@]:0:3}" >"$T/partial.log" 2>&1
rp=$?
[ "$rp" = 1 ] || { echo "ci/fanout.sh: merging 3 of the 4 jobs exited $rp, want 1 (missing cells)"; fail=1; }
xsd=../shared/schemas/junit.xsd
if command -v xmllint >/dev/null && [ -f "$xsd" ]; then
  xmllint --noout --schema "$xsd" "$T/merged/junit.xml" 2>"$T/xmllint.txt" ||
    { echo "ci/fanout.sh: merged junit.xml fails junit.xsd:"; head -5 "$T/xmllint.txt"; fail=1; }
fi
echo "ci/fanout.sh: $n cells; 2 runners x 2 shards + merge $((t1 - t0)) s, unsharded $((t2 - t1)) s; gate $rm/$rf;" \
     "$([ $fail = 0 ] && echo agree || echo DIFFER)$([ -n "${GT_FANOUT_DIR:-}" ] && echo " (outputs: $T)")"
exit $fail
