#!/bin/bash
# bench-report.sh: how long `gauntlet report --html` takes on a large run.
# Not a test: prints the numbers. Builds a synthetic database of N cells
# (default 10,000; two runs, so the baseline diff is exercised too) with the
# test binary's fixture (tests/report_fixture.c: the real schema, every
# status, checks and metrics per cell), then times the HTML report with and
# without a baseline, and the other formats. The limit the design asks
# for: 10,000 cells to HTML in under 2 s.
#
#   ci/bench-report.sh [BUILD_DIR] [N]      (BUILD_DIR default: build)
set -eu
build=${1:-build}
n=${2:-10000}
[ -x "$build/gauntlet" ] && [ -x "$build/test_reports" ] || {
    echo "bench-report: build first ($build/gauntlet and $build/test_reports)" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
db=$dir/bench.sqlite

# Wall and CPU (user+sys) seconds of one command: on a shared CI runner
# the wall time includes waiting for a core, the CPU time is the cost.
t() {
    label=$1; shift
    local TIMEFORMAT="%R %U %S"
    local out
    out=$( { time "$@" >/dev/null 2>&1; } 2>&1 )
    set -- $out
    printf '%-34s %6.2f s wall %6.2f s cpu\n' "$label" "$1" "$(echo "$2 + $3" | bc)"
}

t "build DB ($n cells x 2 runs)" "$build/test_reports" --make-db "$db" "$n"
printf '%-34s %6.1f MiB\n' "database" "$(echo "$(wc -c <"$db") / 1048576" | bc -l)"
t "html (run 2)" "$build/gauntlet" report --db "$db" --run 2 --html "$dir/r.html"
t "html (run 2, baseline run 1)" "$build/gauntlet" report --db "$db" --run 2 --baseline 1 --html "$dir/rb.html"
t "junit" "$build/gauntlet" report --db "$db" --run 2 --junit "$dir/r.xml"
t "markdown" "$build/gauntlet" report --db "$db" --run 2 --markdown "$dir/r.md"
t "json" "$build/gauntlet" report --db "$db" --run 2 --json "$dir/r.json"
t "all four, with baseline" "$build/gauntlet" report --db "$db" --run 2 --baseline 1 \
    --html "$dir/a.html" --junit "$dir/a.xml" --markdown "$dir/a.md" --json "$dir/a.json"
for f in r.html rb.html r.xml r.md r.json; do
    b=$(wc -c <"$dir/$f")
    printf '%-34s %6.2f MiB (%d bytes)\n' "size $f" "$(echo "$b / 1048576" | bc -l)" "$b"
done
if command -v xmllint >/dev/null 2>&1; then
    t "xmllint --noout html" xmllint --noout "$dir/rb.html"
fi
