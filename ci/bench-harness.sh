#!/bin/sh
# ci/bench-harness.sh: what the qualification harness itself costs per cell.
#
# Runs a matrix twice (the first run warms the artifact cache and the page
# cache, the second is measured) and prints, per cell, the harness's share:
# starting the worker process until its first result line, plus the cell's
# database commit. Work the worker does (loading plugins, running suites) and
# its exit (library destructors) are reported by qualify but not counted.
# Budget: mean under GT_BENCH_MAX_MS (default 50); exits 1 when over.
#
# usage: ci/bench-harness.sh [MATRIX] (default matrices/quickstart.json)
#   GAUNTLET=path/to/gauntlet (default build/gauntlet)
set -eu
cd "$(dirname "$0")/.."
BIN=${GAUNTLET:-build/gauntlet}
MATRIX=${1:-matrices/quickstart.json}
MAX_MS=${GT_BENCH_MAX_MS:-50}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
export XDG_CACHE_HOME="${XDG_CACHE_HOME:-$TMP/cache}"

"$BIN" qualify "$MATRIX" --db "$TMP/bench.sqlite" --run-id warm -q >/dev/null 2>&1 || true
"$BIN" qualify "$MATRIX" --db "$TMP/bench.sqlite" --run-id bench --no-progress >"$TMP/out.txt" 2>&1 || true

grep -E '^harness overhead|^gate:' "$TMP/out.txt" || true
# Per-cell lines look like "[ 3/24] pass 0.21s ID  [harness 9.8 ms: start 9.1, commit 0.7; exit 30.2 ms]"
sed -n 's/.*\[harness \([0-9.]*\) ms: start \([0-9.]*\), commit \([0-9.]*\); exit \([0-9.]*\) ms\].*/\1 \2 \3 \4/p' \
    "$TMP/out.txt" | sort -n >"$TMP/ms.txt"
n=$(wc -l <"$TMP/ms.txt")
if [ "$n" -eq 0 ]; then
    echo "bench-harness: no cell ran (see $MATRIX)" >&2
    cat "$TMP/out.txt" >&2
    exit 2
fi
awk -v max="$MAX_MS" '
    { t[NR] = $1; s += $1; st += $2; c += $3; e += $4 }
    END {
        p50 = t[int((NR + 1) / 2)]; p90 = t[int(NR * 0.9 + 0.999)];
        printf "harness per cell over %d cells: mean %.1f ms, median %.1f, p90 %.1f, max %.1f ms\n",
               NR, s / NR, p50, p90, t[NR];
        printf "  of which process start %.1f ms, DB commit %.1f ms (means); worker exit %.1f ms (not counted)\n",
               st / NR, c / NR, e / NR;
        if (s / NR > max) { printf "OVER BUDGET: mean above %s ms\n", max; exit 1 }
        printf "within budget (%s ms)\n", max
    }' "$TMP/ms.txt"
