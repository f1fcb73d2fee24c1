#!/usr/bin/env bash
# kill-rate.sh BUILD_DIR: the gate's kill rate. Reduced versions of the
# shipped quickstart, ci, release and serve matrices (ci/kill-rate.jq: the
# small models stories260k and synth-tiny, f32 and q8_0, reference and cpu,
# the shipped tier without performance and soak, which judge speed and
# memory, not numbers; release with short smoke and accuracy settings;
# the shipped tolerances and gates) are qualified once clean, which must
# pass, and once under each runtime fault (runtime/include/gt/fault.h).
# Every faulted run must fail its gate. The table says, per fault and
# matrix: killed, survived, "survived (justified: ...)" when the shipped
# matrix lists the fault under "survivors" for that tier (matrices/README.md),
# or n/a with the reason the fault cannot apply there.
#
# Exit 0 when every clean run passes and no fault survives unjustified;
# 1 otherwise; 77 (skip, saying why) without jq or ../shared's stories260K.
set -u
b=$(cd "${1:?usage: kill-rate.sh BUILD_DIR}" && pwd)
G=$b/gauntlet
SRC=$(cd "$(dirname "$0")/.." && pwd)
command -v jq >/dev/null || { echo "SKIP kill-rate: jq is not installed"; exit 77; }
[ -f "$SRC/../shared/models/stories260K.gguf" ] ||
  { echo "SKIP kill-rate: no ../shared/models/stories260K.gguf (ci.json and release.json need it)"; exit 77; }
W=$(mktemp -d /tmp/gt-kill-rate.XXXXXX)
trap 'rm -rf "$W"' EXIT
trap 'exit 143' TERM INT
rel=$(realpath --relative-to="$W" "$SRC")

# matrix | models | backends | cpu driver profiles | tier | settings merged in
MATRICES=(
  'quickstart|["synth-tiny"]|["reference","cpu"]|[]|main|{}'
  'ci|["synth-tiny","stories260k"]|["reference","cpu"]|["openblas","act-q8"]|ci|{}'
  'release|["stories260k"]|["reference","cpu"]|["openblas"]|release|{"smoke":{"n_tokens":32},"accuracy":{"max_scored":64,"n_gen":16}}'
  'serve|["synth-tiny"]|["serve-reference","serve-cpu"]|[]|ci|{}'
)
# GT_FAULT | GT_FAULT_BACKEND ("" = every backend, the reference included).
# token-swap exchanges synth-tiny's most frequent greedy token ("R", 309)
# with stories260k's (",", 432), so the swap is visible in both models.
# A backend's bug is injected on cpu (serve: the server started with -b cpu),
# so the reference the harness compares with stays clean; graph-drop-last is
# a bug every backend shares, so only an anchor outside gauntlet can see it.
# pos-wrap@4096 is a bug of length: these tiers stay below 4096 positions,
# so it survives each of them, justified by the matrix's "survivors" (the
# long tier catches it); the entry keeps that claim checked.
FAULTS=(
  'logit-scale=0.01|cpu'
  'logit-scale-quant=0.01|cpu'
  'logit-noise=0.01|cpu'
  'token-swap=309:432|cpu'
  'const-token=300|cpu'
  'nan-at=5|cpu'
  'graph-drop-last|'
  'kv-decode-drop@30|cpu'
  'attn-window=8|cpu'
  'pos-wrap@4096|cpu'
)

fail=0
note() { echo "kill-rate: $*"; }

# An entry nobody knows is refused before anything runs.
for bad in 'no-such-fault' 'no-such-fault:*'; do
  out=$(GT_FAULT=$bad "$G" qualify "$SRC/matrices/quickstart.json" --db "$W/bad.sqlite" 2>&1); rc=$?
  if [ $rc -ne 2 ] || ! grep -qF "GT_FAULT entry '$bad'" <<<"$out"; then
    note "GT_FAULT=$bad: exit $rc, want 2 naming the entry: $out"; fail=1
  fi
done

derive() { # derive NAME MODELS BACKENDS PROFILES TIER SETTINGS
  jq --arg root "$rel" --argjson models "$2" --argjson quants '["f32","q8_0"]' \
     --argjson backends "$3" --argjson profiles "$4" --arg tier "$5" \
     --argjson drop '["performance","soak"]' --argjson settings "$6" \
     -f "$SRC/ci/kill-rate.jq" "$SRC/matrices/$1.json" > "$W/$1.json"
}

# qualify NAME TIER RUN [GT_FAULT GT_FAULT_BACKEND]: the exit code; output in $W/NAME.RUN.log.
qualify() {
  local log=$W/$1.$3.log
  if [ -n "${4:-}" ]; then
    if [ -n "${5:-}" ]; then
      GT_FAULT=$4 GT_FAULT_BACKEND=$5 "$G" qualify "$W/$1.json" --tier "$2" --db "$W/$1.sqlite" \
        --cache-dir "$W/cache" --run-id "$1-$3" --no-localize -j 2 >"$log" 2>&1
    else
      GT_FAULT=$4 "$G" qualify "$W/$1.json" --tier "$2" --db "$W/$1.sqlite" \
        --cache-dir "$W/cache" --run-id "$1-$3" --no-localize -j 2 >"$log" 2>&1
    fi
  else
    env -u GT_FAULT -u GT_FAULT_BACKEND "$G" qualify "$W/$1.json" --tier "$2" --db "$W/$1.sqlite" \
      --cache-dir "$W/cache" --run-id "$1-$3" --no-localize -j 2 >"$log" 2>&1
  fi
}

# What failed in a run: its cells not passing, and up to 4 failing checks
# and metrics ("accuracy.drift_kld_mean").
failed() {
  command -v sqlite3 >/dev/null || { echo "gate FAIL"; return; }
  sqlite3 "$W/$1.sqlite" "
    WITH c AS (SELECT cells.* FROM cells JOIN runs ON runs.id = cells.run_id
               WHERE runs.run_key LIKE '%$1-$2'),
         f AS (SELECT DISTINCT suite || '.' || check_name AS n FROM results
               WHERE cell IN (SELECT id FROM c) AND status IN ('fail', 'error')
               UNION SELECT DISTINCT suite || '.' || name FROM metrics
               WHERE cell IN (SELECT id FROM c) AND verdict = 'fail')
    SELECT (SELECT COUNT(*) FROM c WHERE status NOT IN ('pass', 'xfail', 'skip')) || '/' ||
           (SELECT COUNT(*) FROM c) || ' cells fail: ' ||
           COALESCE((SELECT group_concat(n, ', ') FROM (SELECT n FROM f ORDER BY n LIMIT 4)), '?') ||
           CASE WHEN (SELECT COUNT(*) FROM f) > 4 THEN ', ...' ELSE '' END;"
}

# The shipped matrix's reason for letting this fault kind survive this tier, or "".
justified() {
  jq -r --arg kind "$2" --arg tier "$3" \
    '[.survivors[]? | select(.fault == $kind and (.tiers == null or (.tiers | index($tier))))
      | .reason][0] // ""' "$SRC/matrices/$1.json"
}

declare -A CELL
start=$(date +%s)
for m in "${MATRICES[@]}"; do
  IFS='|' read -r name models backends profiles tier settings <<<"$m"
  if ! derive "$name" "$models" "$backends" "$profiles" "$tier" "$settings"; then
    note "$name: cannot derive the reduced matrix"; fail=1; continue
  fi
  qualify "$name" "$tier" clean; rc=$?
  if [ $rc -ne 0 ]; then
    note "$name: the clean run exits $rc, want 0 (gate PASS); its log:"
    tail -20 "$W/$name.clean.log"; fail=1; continue
  fi
  note "$name ($tier, $(grep -c '^\[' "$W/$name.clean.log") cells): clean run passes"
  quantized=$(jq '[.quants[] | select(. != "f32" and . != "f16" and . != "bf16")] | length' "$W/$name.json")
  for i in "${!FAULTS[@]}"; do
    IFS='|' read -r fault scope <<<"${FAULTS[$i]}"
    kind=${fault%%[=@]*}
    if [ "$kind" = logit-scale-quant ] && [ "$quantized" = 0 ]; then
      CELL[$i,$name]="n/a (no quantized cell)"; continue
    fi
    qualify "$name" "$tier" "f$i" "$fault" "$scope"; rc=$?
    gate=$(grep -o 'gate: [A-Z]* ([^)]*)' "$W/$name.f$i.log" | tail -1)
    case $rc in
      1) CELL[$i,$name]="killed ($(failed "$name" "f$i"))" ;;
      0) why=$(justified "$name" "$kind" "$tier")
         if [ -n "$why" ]; then CELL[$i,$name]="survived (justified: $why)"
         else CELL[$i,$name]="SURVIVED: ${gate:-gate PASS}"; fail=1; fi ;;
      *) CELL[$i,$name]="ERROR (qualify exit $rc)"; fail=1
         note "$name under GT_FAULT=$fault: exit $rc:"; tail -20 "$W/$name.f$i.log" ;;
    esac
  done
done

echo
echo "kill-rate: fault x matrix (reduced matrices: ci/kill-rate.sh; $(( $(date +%s) - start )) s)"
for i in "${!FAULTS[@]}"; do
  IFS='|' read -r fault scope <<<"${FAULTS[$i]}"
  echo "  $fault (on ${scope:-every backend})"
  for m in "${MATRICES[@]}"; do
    name=${m%%|*}
    printf '    %-11s %s\n' "$name" "${CELL[$i,$name]:-not run (the clean run failed)}"
  done
done
survivors=0
for k in "${!CELL[@]}"; do [[ ${CELL[$k]} == SURVIVED* ]] && survivors=$((survivors + 1)); done
note "$survivors unjustified survivor(s)"
[ $fail = 0 ] && note "every fault killed or justified; clean runs pass"
exit $fail
