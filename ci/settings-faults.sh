#!/usr/bin/env bash
# settings-faults.sh BUILD_DIR: each setting fault (runtime/include/gt/fault.h:
# batch-split@0, seq-bleed@0, thread-race) fails exactly the cells that have
# its setting, on cpu and on opencl. A settings matrix (synth-tiny f32 on
# cpu and opencl, n_batch {7, 512} x n_parallel {1, 4} x threads {1, 2}: 16
# cells of smoke + functional + accuracy at ci.json's sizes and tolerances)
# is qualified once clean, which must pass, then once per fault x backend
# with the fault on that backend (GT_FAULT_BACKEND): the cells that fail
# must be exactly that backend's cells with the fault's setting (n_batch 7
# splits the 32- and 64-token prompts; n_parallel 4 puts 3 companions in
# the session; threads 2), and every other cell must pass.
#
# Exit 0 when all hold; 1 otherwise; 77 (skip, saying why) without jq or
# sqlite3. Without OpenCL the opencl half is reported as not run (and the
# cpu half still decides).
set -u
b=$(cd "${1:?usage: settings-faults.sh BUILD_DIR}" && pwd)
G=$b/gauntlet
SRC=$(cd "$(dirname "$0")/.." && pwd)
for t in jq sqlite3; do
  command -v $t >/dev/null || { echo "SKIP settings-faults: $t is not installed"; exit 77; }
done
W=$(mktemp -d /tmp/gt-settings-faults.XXXXXX)
trap 'rm -rf "$W"' EXIT
trap 'exit 143' TERM INT
rel=$(realpath --relative-to="$W" "$SRC")
note() { echo "settings-faults: $*"; }

backends='["cpu"]'
if "$G" test-ops -b opencl --op SCALE >/dev/null 2>&1; then
  backends='["cpu","opencl"]'
else
  note "opencl: not run here (no usable OpenCL device: gauntlet test-ops -b opencl fails)"
fi

jq --arg root "$rel" --argjson backends "$backends" '
  {name: "settings-faults", root: $root,
   description: "ci/settings-faults.sh: the setting faults fail exactly their cells",
   defaults: {timeout_s: 600, memory_mb: 8192, seed: 1,
              settings: {n_batch: [7, 512], n_parallel: [1, 4], threads: [1, 2]}},
   models: [.models[] | select(.id == "synth-tiny") | del(.anchors)],
   quants: ["f32"],
   backends: $backends,
   tolerances: {default: .tolerances.default, quants: {f32: (.tolerances.quants.f32 // {})}},
   tiers: {faults: {suites: ["smoke", "functional", "accuracy"],
                    settings: (.tiers.ci.settings | {smoke, functional, accuracy})}},
   default_tier: "faults",
   gate: {allowed: ["pass"]}}' "$SRC/matrices/ci.json" > "$W/m.json" ||
  { note "cannot write the matrix"; exit 1; }

# qualify RUN [GT_FAULT GT_FAULT_BACKEND [FOLLOW]]: its exit code; log in
# $W/RUN.log. FOLLOW: a failed cell runs its sweep (qualify without
# --no-localize).
qualify() {
  local loc=--no-localize
  [ -n "${4:-}" ] && loc=
  if [ -n "${2:-}" ]; then
    GT_FAULT=$2 GT_FAULT_BACKEND=$3 "$G" qualify "$W/m.json" --db "$W/db.sqlite" \
      --cache-dir "$W/cache" --run-id "$1" $loc -j 2 >"$W/$1.log" 2>&1
  else
    env -u GT_FAULT -u GT_FAULT_BACKEND "$G" qualify "$W/m.json" --db "$W/db.sqlite" \
      --cache-dir "$W/cache" --run-id "$1" --no-localize -j 2 >"$W/$1.log" 2>&1
  fi
}

# The cells of a run that did not pass, sorted, one per line.
not_passing() {
  sqlite3 "$W/db.sqlite" "SELECT cells.cell_id FROM cells JOIN runs ON runs.id = cells.run_id
                          WHERE runs.run_key LIKE '%$1' AND cells.status != 'pass'
                          ORDER BY cells.cell_id;"
}
n_cells() {
  sqlite3 "$W/db.sqlite" "SELECT COUNT(*) FROM cells JOIN runs ON runs.id = cells.run_id
                          WHERE runs.run_key LIKE '%$1';"
}

fail=0
start=$(date +%s)
qualify clean; rc=$?
if [ $rc -ne 0 ]; then
  note "the clean run exits $rc, want 0 (gate PASS); its log:"; tail -30 "$W/clean.log"; exit 1
fi
note "clean run: $(n_cells clean) cells pass"

# fault | the id part of the cells it must fail
FAULTS=('batch-split@0|nb7-' 'seq-bleed@0|-np4-' 'thread-race|-t2')
for be in $(jq -r '.[]' <<<"$backends"); do
  for f in "${FAULTS[@]}"; do
    IFS='|' read -r fault part <<<"$f"
    run="${fault%%[@=]*}-$be"
    qualify "$run" "$fault" "$be"; rc=$?
    want=$(sqlite3 "$W/db.sqlite" "SELECT cell_id FROM cells JOIN runs ON runs.id = cells.run_id
                                   WHERE runs.run_key LIKE '%clean' ORDER BY cell_id;" |
           grep "/$be/" | grep -F -- "$part")
    got=$(not_passing "$run")
    if [ $rc -eq 1 ] && [ "$got" = "$want" ]; then
      note "$fault on $be: gate FAIL, exactly its $(wc -l <<<"$want") cells fail ($part)"
    else
      note "$fault on $be: exit $rc (want 1); cells not passing differ from those with '$part'"
      diff <(echo "$want") <(echo "$got") | sed 's/^/    /'
      tail -5 "$W/$run.log"
      fail=1
    fi
  done
done

# A failed settings cell runs the sweep by itself (check settings.sweep),
# which names the setting: seq-bleed on cpu, without --no-localize.
qualify follow seq-bleed@0 cpu follow; rc=$?
sweeps=$(sqlite3 "$W/db.sqlite" "SELECT cells.cell_id || ': ' || results.status || ': ' || results.message
                                 FROM results JOIN cells ON cells.id = results.cell
                                 JOIN runs ON runs.id = cells.run_id
                                 WHERE runs.run_key LIKE '%follow' AND results.suite = 'settings'
                                   AND results.check_name = 'sweep' ORDER BY cells.cell_id;")
if [ $rc -eq 1 ] && [ "$(grep -c 'fail: diverges when n_parallel' <<<"$sweeps")" = 4 ]; then
  note "seq-bleed@0 on cpu: each of the 4 failed cells' sweep names n_parallel"
  sed -n 1p <<<"$sweeps" | sed 's/^/    /'
else
  note "seq-bleed@0 on cpu with the sweep: exit $rc; settings.sweep results:"
  sed 's/^/    /' <<<"${sweeps:-(none)}"; tail -5 "$W/follow.log"; fail=1
fi
note "$(( $(date +%s) - start )) s"
[ $fail = 0 ] && note "each setting fault fails exactly the cells of its setting"
exit $fail
