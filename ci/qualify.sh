#!/usr/bin/env bash
# ci/qualify.sh: what a CI qualification job runs; one script for every CI
# system, so the YAML only says where and how many.
#
#   ci/qualify.sh [--matrix F] [--tier T] [--shard I/N] [--backends LIST] [--baseline B]
#                 [--out DIR] [--jobs N]
#       runs one shard (or all) of a matrix tier, only the cells of LIST's
#       backend ids when given (one hardware runner's part): DIR gets results.sqlite
#       (results-I-of-N.sqlite for a shard), junit.xml, report.html and
#       summary.md; exits with the gate's code (0 pass, 1 fail, 2 config).
#   ci/qualify.sh merge [--baseline B] [--out DIR] SHARD.sqlite...
#       the merge job: `gauntlet merge` the shards' databases into
#       DIR/results.sqlite, `gauntlet report` (HTML, JUnit, Markdown) and
#       `gauntlet db gate` per merged run (one run per run key: shards
#       sharing GT_RUN_ID become one; several keys get report-<key>.html and
#       so on); exits with the worst gate code.
#
# Arguments win over the environment: GT_MATRIX (matrices/ci.json), GT_TIER
# (the matrix's default), GT_SHARD (I/N; empty = unsharded), GT_BACKENDS
# (comma-separated backend ids; empty = all), GT_BASELINE (a database file
# or run key; empty = none), GT_OUT (out), GT_JOBS (2), GAUNTLET
# (build/gauntlet), GT_CACHE_DIR (artifact cache; default gauntlet's).
# Every job of one run (its shards, on every hardware runner) must share a
# run id: set GT_RUN_ID to the CI pipeline's id (gauntlet also reads
# GITHUB_RUN_ID and CI_PIPELINE_ID by itself).
set -uo pipefail
cd "$(dirname "$0")/.."
G=${GAUNTLET:-build/gauntlet}
MATRIX=${GT_MATRIX:-matrices/ci.json}
TIER=${GT_TIER:-}
SHARD=${GT_SHARD:-}
BACKENDS=${GT_BACKENDS:-}
BASELINE=${GT_BASELINE:-}
OUT=${GT_OUT:-out}
JOBS=${GT_JOBS:-2}
MODE=qualify
[ "${1:-}" = merge ] && { MODE=merge; shift; }

usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
INPUTS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --matrix) MATRIX=$2; shift 2 ;;
    --tier) TIER=$2; shift 2 ;;
    --shard) SHARD=$2; shift 2 ;;
    --backends) BACKENDS=$2; shift 2 ;;
    --baseline) BASELINE=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -j|--jobs) JOBS=$2; shift 2 ;;
    -h|--help) usage ;;
    -*) echo "ci/qualify.sh: unknown option $1" >&2; usage ;;
    *) INPUTS+=("$1"); shift ;;
  esac
done
[ -x "$G" ] || { echo "ci/qualify.sh: $G is not built (bash ci/setup.sh)" >&2; exit 2; }
mkdir -p "$OUT" || exit 2

if [ "$MODE" = merge ]; then
  [ ${#INPUTS[@]} -gt 0 ] || { echo "ci/qualify.sh merge: no shard databases given" >&2; exit 2; }
  db="$OUT/results.sqlite"
  rm -f "$db" "$db-wal" "$db-shm"
  "$G" merge "$db" "${INPUTS[@]}" || exit 2
  "$G" db check "$db" >"$OUT/db-check.txt" || { cat "$OUT/db-check.txt" >&2; exit 2; }
  # One run per run key: the shards of one hardware class share a key and
  # are one run here; each class (GT_RUN_ID=<pipeline>-<label>) is its own
  # run, reported and gated on its own. A single run gets plain file names.
  if command -v sqlite3 >/dev/null; then
    mapfile -t keys < <(sqlite3 -batch -noheader "$db" "SELECT run_key FROM runs ORDER BY run_key")
  else
    keys=("")
  fi
  [ ${#keys[@]} -gt 0 ] || { echo "ci/qualify.sh merge: no run in the merged database" >&2; exit 2; }
  rc=0
  for key in "${keys[@]}"; do
    sfx=""
    [ ${#keys[@]} -gt 1 ] && sfx="-$(printf '%s' "${key##*/}" | tr -c 'A-Za-z0-9._-' _)"
    rargs=(--db "$db" --html "$OUT/report$sfx.html" --junit "$OUT/junit$sfx.xml"
           --markdown "$OUT/summary$sfx.md")
    [ -n "$key" ] && rargs+=(--run "$key")
    [ -n "$BASELINE" ] && rargs+=(--baseline "$BASELINE")
    "$G" report "${rargs[@]}" || exit 2
    # The run's gate, from the policy recorded with it.
    if [ -n "$key" ]; then "$G" db gate "$db" "$key"; else "$G" db gate "$db"; fi
    r=$?
    # A shard whose job died before uploading fails this gate by name: the
    # merged run records what was merged into it (gate.c).
    [ $r -gt $rc ] && rc=$r
  done
  echo "ci/qualify.sh merge: gate exit $rc; outputs in $OUT/"
  exit $rc
fi

[ -f "$MATRIX" ] || { echo "ci/qualify.sh: no matrix $MATRIX" >&2; exit 2; }
args=(qualify "$MATRIX" -j "$JOBS" --no-progress)
db="$OUT/results.sqlite"
if [ -n "$SHARD" ]; then
  case "$SHARD" in
    [0-9]*/[0-9]*) ;;
    *) echo "ci/qualify.sh: GT_SHARD must be I/N, got '$SHARD'" >&2; exit 2 ;;
  esac
  db="$OUT/results-${SHARD%/*}-of-${SHARD#*/}.sqlite"
  args+=(--shard "$SHARD")
  if [ -z "${GT_RUN_ID:-}${GITHUB_RUN_ID:-}${CI_PIPELINE_ID:-}" ]; then
    echo "ci/qualify.sh: sharded run without GT_RUN_ID; shards will not merge into one run" >&2
  fi
fi
[ -n "$TIER" ] && args+=(--tier "$TIER")
[ -n "$BACKENDS" ] && args+=(--backends "$BACKENDS")
[ -n "${GT_CACHE_DIR:-}" ] && args+=(--cache-dir "$GT_CACHE_DIR")
[ -n "$BASELINE" ] && args+=(--baseline "$BASELINE")
args+=(--db "$db" --junit "$OUT/junit.xml" --html "$OUT/report.html" --markdown "$OUT/summary.md")
echo "ci/qualify.sh: $G ${args[*]}"
"$G" "${args[@]}"
rc=$?
echo "ci/qualify.sh: gate exit $rc; outputs in $OUT/"
exit $rc
