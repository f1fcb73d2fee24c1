#!/usr/bin/env bash
# ci/readme-commands.sh: every shell command in README.md's code blocks,
# run on a build (CTest readme_commands: the fresh one under test).
#
# The commands are read from the README itself (indented and fenced code
# blocks; a trailing "\" joins lines, a trailing "# comment" is dropped,
# "A && B" is two commands). Each must have an entry in the table below:
#   run    run it; exit 0, and the files it writes must exist afterwards
#   skip   not run here, with the reason printed as SKIP (a GPU, root and
#          the network, many minutes: then where CI runs it)
#   plain  run when the build under test has no sanitizers, else SKIP
#          (valgrind cannot run ASan binaries)
#   opencl run when `gauntlet devices` lists an OpenCL device, else SKIP
#          with the reason it gives
#   serve  started in the background, one /v1/completions request
#          answered, then stopped
# A README command with no entry fails the test ("not covered"), and so
# does an entry whose command is no longer in the README ("stale"), so the
# table and the README cannot drift apart silently.
#
# Placeholders are filled the same way everywhere: MODEL, MODEL.gguf and
# IN.gguf are ../shared/models/stories260K.gguf (without ../shared, or with
# GT_TEST_NO_SHARED=1, a synthetic stand-in of its shape written there by
# `gauntlet synth --preset stories260k`), OUT.gguf is out.gguf, URL
# and H a copy of that model served by a python3 http.server this script
# starts on 127.0.0.1 and its sha256, $CI_RUN a run id. "[--opt X]" runs
# once without and once with the options; "a|b" runs once with each.
#
# Commands run in a scratch folder laid out like a checkout (the source's
# top-level entries linked, build/ -> the build, ../shared -> the shared
# folder or the stand-in's folder), with gauntlet on PATH and XDG_CACHE_HOME inside it, so nothing
# lands in the source tree or the user's cache.
#
# usage: ci/readme-commands.sh [BUILD_DIR]   (default build)
#   env: GT_README (README.md), GT_README_KEEP=1 keeps the scratch folder
# exit: 0 every command ran as documented or is listed as skipped,
#       1 a command failed, is not covered or an entry is stale, 2 setup
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" 2>/dev/null && pwd) ||
  { echo "ci/readme-commands.sh: no build folder ${1:-$SRC/build}" >&2; exit 2; }
README=${GT_README:-$SRC/README.md}
SHARED=$(cd "$SRC/../shared" 2>/dev/null && pwd) || SHARED=""
[ -x "$BUILD/gauntlet" ] || { echo "ci/readme-commands.sh: $BUILD/gauntlet is not built" >&2; exit 2; }
[ -f "$README" ] || { echo "ci/readme-commands.sh: no $README" >&2; exit 2; }

# ---- the table ---------------------------------------------------------------
K=() M=() A=()
entry() { K+=("$1"); M+=("$2"); A+=("${3:-}"); }
declare -A PRE # command -> shell run first (inputs the README assumes exist)

entry 'bash ci/setup.sh' skip \
  "installs Debian packages (root, the network) and builds into build/; the commands after it run on this test's build instead"
entry './build/gauntlet qualify matrices/quickstart.json --db results.sqlite --html report.html --junit junit.xml' run \
  'results.sqlite report.html junit.xml'
entry 'bash ci/test.sh' skip \
  "builds build/ and runs the whole CTest suite, this test included (about 10 minutes on 2 cores); CI runs it in step fresh-clone of .ci/run"
entry 'gauntlet plan matrices/ci.json' run
entry 'gauntlet plan --no-probe matrices/settings.json' run
entry 'gauntlet qualify matrices/settings.json --db settings.sqlite -j 2' skip \
  "the nightly settings grid: 72 cells of SmolLM2 and Gemma 3, 1.5 to 3.5 hours on 2 cores; CI runs its 8-cell block in ci.json and ci/settings-faults.sh (CTest settings_faults)"
entry 'gauntlet qualify matrices/nightly.json --tier long --db long.sqlite -j 2' skip \
  "the nightly long tier: 8 cells of Gemma 3 (to 32k tokens) and SmolLM2 (to 8k), hours on 2 cores on the reference backend; CI runs the suite at 2048 tokens in ci.json, on a synthetic model in ci/sanitize-cells.json and in CTest test_long"
entry 'bash ci/sanitize-long.sh' skip \
  "a Gemma 3 cell at 8192 tokens under ASan/UBSan, 20-40 minutes on 2 cores: nightly; .ci/run's sanitize step runs the long suite on a synthetic model"
entry 'gauntlet qualify matrices/ci.json --db results.sqlite -j 2 --junit junit.xml --html report.html' skip \
  "takes ~15 minutes on 2 cores (60 cells, SmolLM2 and Gemma 3 among them); CI runs it in the qualification job of ci/workflows/*.yml (ci/qualify.sh), not in .ci/run; the quickstart run above left the results.sqlite the next command reads"
entry 'gauntlet qualify matrices/serve.json --db serve.sqlite --html serve.html' run \
  'serve.sqlite serve.html'
entry 'bash ci/peer-llamacpp.sh' skip \
  "builds llama.cpp from the llama-cpp-python sdist on PyPI (the network, ~5 minutes on 2 cores); never part of ci/test.sh: test_qualify_http runs matrices/peer.json when it is built"
entry 'gauntlet qualify matrices/peer.json --db peer.sqlite --html peer.html' skip \
  "needs SmolLM2 and about 2 minutes; test_qualify_http runs it (peer_matrix_qualifies with the peer built, peer_matrix_without_peer_skips without)"
entry 'gauntlet bench -m SmolLM2-Q4_0.gguf -t 2 --peer llama-bench=PATH' skip \
  "needs the peer's llama-bench (ci/peer-llamacpp.sh); ci/bench.sh runs it when the peer is built"
entry 'gauntlet report --db results.sqlite --baseline last-release.sqlite --markdown pr.md' run 'pr.md'
PRE['gauntlet report --db results.sqlite --baseline last-release.sqlite --markdown pr.md']='cp results.sqlite last-release.sqlite'
entry 'GT_RUN_ID=$CI_RUN gauntlet qualify matrices/ci.json --shard 1/4 --db s1.sqlite' skip \
  "a quarter of ci.json's ~15 minutes on 2 cores; CI runs it in the qualification job of ci/workflows/*.yml; the merge below gets the four shards of matrices/quickstart.json instead (ci/fanout.sh, CTest ci_fanout, checks sharding on quickstart)"
entry 'gauntlet merge all.sqlite s1.sqlite s2.sqlite s3.sqlite s4.sqlite' run 'all.sqlite'
PRE['gauntlet merge all.sqlite s1.sqlite s2.sqlite s3.sqlite s4.sqlite']='for k in 1 2 3 4; do GT_RUN_ID=$CI_RUN gauntlet qualify matrices/quickstart.json --tier smoke --shard $k/4 --db s$k.sqlite --no-progress >/dev/null || exit 1; done'
entry 'gauntlet db gate all.sqlite' run
entry 'gauntlet compare -m ../shared/models/stories260K.gguf --a cpu --b opencl --prompts suites/prompts/stories.jsonl -n 64 [--quant q4_0] [--json out.json]' opencl
entry 'gauntlet compare -m ../shared/models/stories260K.gguf --a reference --b cpu --localize -p "Once upon a time" [--json out.json] [--html out.html]' run
entry 'gauntlet compare -m ../shared/models/stories260K.gguf --a reference --b cpu --localize --passkey 400 [--from 380]' run
entry 'gauntlet compare -m ../shared/models/stories260K.gguf --b cpu --sweep n_batch,n_parallel,threads [--json out.json]' run
entry 'gauntlet --help' run
entry 'gauntlet devices [--json]' run
entry 'gauntlet inspect MODEL.gguf' run
entry 'gauntlet tokenize -m MODEL "text"' run
entry 'gauntlet generate -m MODEL -b cpu -p "Once upon a time" -n 64 [--temp 0.8 --seed 7]' run
entry 'gauntlet generate -m MODEL -b cpu --json-schema tests/schemas/person.json -p "Lily is 5 years old. As JSON:" -n 1000' run
entry 'gauntlet bench -m MODEL -b cpu --json-schema tests/schemas/person.json -n 1000 -r 1' run
entry 'gauntlet logits -m MODEL -b opencl -p "Zoo" [--json]' opencl
entry 'gauntlet quantize IN.gguf OUT.gguf q8_0' run 'out.gguf'
entry 'gauntlet synth OUT.gguf --preset tiny|smollm2-135m --seed 1 [--type q4_0]' run 'out.gguf'
entry 'gauntlet synth OUT.gguf --arch qwen3 --preset qwen3-tiny' run 'out.gguf'
entry 'gauntlet test-ops -b cpu' run
entry 'gauntlet bench -m MODEL -b cpu -t 2' run
entry 'gauntlet bench -m MODEL -b cpu -t 2 -p 16 -n 8 -d 0,64,256' run
entry 'gauntlet fetch --url URL --sha256 H' run 'cache/gauntlet/models/stories260K.gguf'
entry 'gauntlet anchors matrices/ci.json stories260k --peer llama-perplexity=P --peer llama-server=S' skip \
  "needs the llama.cpp peer (ci/peer-llamacpp.sh: a 15-minute build, never part of CI); its output is committed in matrices/anchors/ and ci/anchors.sh measures it again"
entry 'gauntlet serve -m MODEL -b cpu --port 8080' serve
entry 'gauntlet serve -m MODEL -b cpu --port 8080 --parallel 4' serve
entry 'bash ci/fuzz.sh 60' skip \
  "a clang build of the instrumented tree, then 4 targets x 60 s: over 5 minutes; CI runs it as step fuzz of .ci/run"
entry 'bash ci/sanitize.sh' skip \
  "rebuilds everything with ASan + UBSan and runs the unit-level tests and one qualification cell per backend under them (about 4 minutes on 2 cores); CI runs it as step sanitize of .ci/run"
entry 'bash ci/valgrind.sh' plain

# ---- the README's commands ---------------------------------------------------
# One command per line: code-block lines (4-space indented after a blank
# line, or inside ``` fences), continuations joined, comments dropped.
extract() {
  awk '
    function flush() { if (cmd != "") print cmd; cmd = "" }
    function add(l) {
      sub(/^[ \t]+/, "", l)
      if (cont) { cmd = cmd " " l } else { flush(); cmd = l }
      cont = sub(/[ \t]*\\$/, "", cmd)
      if (!cont) { sub(/[ \t]+#[ \t].*$/, "", cmd); sub(/[ \t]+$/, "", cmd) }
    }
    /^```/ { fenced = !fenced; flush(); prev_blank = 0; next }
    fenced { if ($0 !~ /^[ \t]*$/) add($0); next }
    /^(    |\t)/ && (prev_blank || inblock) { inblock = 1; add($0); next }
    /^[ \t]*$/ { prev_blank = 1; if (!cont) flush(); next }
    { inblock = 0; prev_blank = 0; flush() }
    END { flush() }
  ' "$README" | awk '{ n = split($0, p, / && /); for (i = 1; i <= n; i++) print p[i] }'
}
mapfile -t CMDS < <(extract)
[ ${#CMDS[@]} -gt 0 ] || { echo "ci/readme-commands.sh: no commands found in $README" >&2; exit 2; }

# ---- the scratch checkout ----------------------------------------------------
T=$(mktemp -d /tmp/gt-readme-XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  if [ "${GT_README_KEEP:-0}" = 1 ]; then echo "ci/readme-commands.sh: kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT
W=$T/main
mkdir -p "$W" "$T/cache"
for e in "$SRC"/*; do
  n=$(basename "$e")
  case "$n" in build|build-*|results.sqlite|report.html|junit.xml|out) continue ;; esac
  ln -s "$e" "$W/$n"
done
ln -s "$BUILD" "$W/build"
[ "${GT_TEST_NO_SHARED:-0}" = 1 ] && SHARED="" # as in a fresh clone (tests/testutil.h)
if [ -n "$SHARED" ] && [ -f "$SHARED/models/stories260K.gguf" ]; then
  ln -s "$SHARED" "$T/shared"
else
  # A fresh clone has no ../shared: the scratch checkout's ../shared gets a
  # synthetic stand-in of stories260K's shape under its name (the tests'
  # gt_test_llama does the same), so the README's commands run anyway.
  mkdir -p "$T/shared/models"
  if ! "$BUILD/gauntlet" synth "$T/shared/models/stories260K.gguf" --preset stories260k --seed 260 \
      >"$T/synth.log" 2>&1; then
    echo "ci/readme-commands.sh: gauntlet synth failed:"; cat "$T/synth.log"; exit 2
  fi
  echo "ci/readme-commands.sh: no ../shared/models/stories260K.gguf: MODEL is a synthetic stand-in (gauntlet synth --preset stories260k --seed 260)"
fi
export PATH="$BUILD:$PATH" XDG_CACHE_HOME=$W/cache CI_RUN=readme-$$
mkdir -p "$XDG_CACHE_HOME"
MODEL=../shared/models/stories260K.gguf
cd "$W" || exit 2
[ -f "$MODEL" ] || { echo "ci/readme-commands.sh: no $MODEL in the scratch checkout"; exit 2; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# A local copy of the model behind URL, for `gauntlet fetch`.
URL="" SHA=""
if command -v python3 >/dev/null; then
  mkdir -p "$T/www" && cp "$MODEL" "$T/www/stories260K.gguf"
  port=$(free_port)
  python3 -m http.server "$port" --bind 127.0.0.1 --directory "$T/www" >"$T/http.log" 2>&1 &
  PIDS+=($!)
  URL=http://127.0.0.1:$port/stories260K.gguf
  SHA=$(sha256sum "$MODEL" | cut -d' ' -f1)
  for _ in $(seq 50); do curl -sf -o /dev/null -r 0-0 "$URL" && break; sleep 0.1; done
fi
SANITIZED=$(sed -n 's/^GT_SANITIZE:[A-Z]*=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)
OPENCL_WHY=""
if ! gauntlet devices 2>&1 | awk '/^opencl/ {f = 1} f && /^  \[0\]/ {ok = 1} END {exit !ok}'; then
  OPENCL_WHY="needs an OpenCL device: $(gauntlet devices 2>&1 | grep '^opencl' | head -1 | tr -s ' ')"
fi

fill() { # placeholders -> this machine's values
  local c=" $1 "
  c=${c// MODEL.gguf / $MODEL }
  c=${c// MODEL / $MODEL }
  c=${c// IN.gguf / $MODEL }
  c=${c// OUT.gguf / out.gguf }
  c=${c// URL / $URL }
  c=${c// H / $SHA }
  c=${c# }
  printf '%s' "${c% }"
}
variants() { # "[...]" off and on, then each alternative of an "a|b" word
  local c=$1 v
  local off on
  if [[ $c == *"["* ]]; then
    off=$(sed -E 's/ ?\[[^]]*\]//g' <<<"$c")
    on=$(sed -E 's/\[([^]]*)\]/\1/g' <<<"$c")
    set -- "$off" "$on"
  else
    set -- "$c"
  fi
  for v in "$@"; do
    if [[ $v =~ ([^\ ]+)\|([^\ ]+) ]]; then
      local whole=${BASH_REMATCH[0]} alt
      IFS='|' read -ra alts <<<"$whole"
      for alt in "${alts[@]}"; do printf '%s\n' "${v/"$whole"/$alt}"; done
    else
      printf '%s\n' "$v"
    fi
  done
}

fail=0 n_run=0 n_skip=0
t_start=$(date +%s)
declare -A SEEN
run_one() { # command as run, files that must exist
  local c=$1 files=$2 f t0 rc
  t0=$(date +%s.%N)
  rm -f $files
  bash -c "$c" >"$T/cmd.log" 2>&1
  rc=$?
  # Under ASan, LeakSanitizer's own tracer sometimes crashes while it stops
  # PoCL's worker threads at exit ("Tracer caught signal 11"): a failure of
  # the tool, not a finding. Run once more, and say so; a real leak report
  # or any other failure is never retried.
  if [ $rc -ne 0 ] && grep -q 'LeakSanitizer has encountered a fatal error' "$T/cmd.log" &&
     ! grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer: detected)|runtime error:' "$T/cmd.log"; then
    echo "RETRY $c  (LeakSanitizer's tracer crashed at exit: $(grep -m1 'Tracer caught' "$T/cmd.log"))"
    bash -c "$c" >"$T/cmd.log" 2>&1
    rc=$?
  fi
  local dt
  dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  if [ $rc -ne 0 ]; then
    echo "FAIL  $c  (exit $rc, ${dt} s):"; tail -15 "$T/cmd.log" | sed 's/^/      /'; fail=1; return
  fi
  for f in $files; do
    [ -s "$f" ] || { echo "FAIL  $c  (exit 0 but it wrote no $f)"; fail=1; return; }
  done
  echo "PASS  $c  (${dt} s${files:+; wrote $files})"
  n_run=$((n_run + 1))
}
serve_one() { # the server: up, one completion, down
  local c=$1 port pid ok=0
  port=$(free_port)
  c=${c//--port 8080/--port $port}
  bash -c "exec $c" >"$T/serve.log" 2>&1 &
  pid=$!
  PIDS+=($pid)
  for _ in $(seq 100); do
    if curl -sf -o "$T/completion.json" -H 'Content-Type: application/json' \
        -d '{"prompt": "Once upon a time", "max_tokens": 8}' "http://127.0.0.1:$port/v1/completions"; then
      ok=1; break
    fi
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
  done
  kill $pid 2>/dev/null; wait $pid 2>/dev/null
  if [ $ok = 1 ] && grep -q '"choices"' "$T/completion.json"; then
    echo "PASS  $c  (port 8080 replaced by a free one; /v1/completions answered, server stopped)"
    n_run=$((n_run + 1))
  else
    echo "FAIL  $c  (no answer from /v1/completions):"; tail -15 "$T/serve.log" | sed 's/^/      /'; fail=1
  fi
}

for readme_cmd in "${CMDS[@]}"; do
  i=-1
  for j in "${!K[@]}"; do [ "${K[$j]}" = "$readme_cmd" ] && { i=$j; break; }; done
  if [ $i -lt 0 ]; then
    echo "FAIL  not covered: README command \"$readme_cmd\" is neither run nor listed with a reason in ci/readme-commands.sh"
    fail=1; continue
  fi
  SEEN[$i]=1
  mode=${M[$i]} arg=${A[$i]}
  if [ "$mode" = plain ]; then
    if [ -n "$SANITIZED" ]; then
      mode=skip arg="the build under test has -fsanitize=$SANITIZED and valgrind cannot run ASan binaries; CI runs it on the plain build (step valgrind of .ci/run)"
    else
      mode=run arg=""
    fi
  fi
  if [ "$mode" = opencl ]; then
    if [ -n "$OPENCL_WHY" ]; then mode=skip arg=$OPENCL_WHY; else mode=run arg=""; fi
  fi
  if [ "$mode" = skip ]; then
    echo "SKIP  $readme_cmd: $arg"; n_skip=$((n_skip + 1)); continue
  fi
  if [ -n "${PRE[$readme_cmd]:-}" ]; then
    bash -c "${PRE[$readme_cmd]}" >"$T/pre.log" 2>&1 ||
      { echo "FAIL  $readme_cmd: preparing its inputs failed:"; tail -15 "$T/pre.log"; fail=1; continue; }
    echo "PREP  ${PRE[$readme_cmd]}"
  fi
  if [[ $readme_cmd == *URL* && -z $URL ]]; then
    echo "SKIP  $readme_cmd: no python3 here for the local HTTP server behind URL"; n_skip=$((n_skip + 1)); continue
  fi
  mapfile -t vs < <(variants "$(fill "$readme_cmd")")
  for v in "${vs[@]}"; do
    files=$arg
    [[ $v == *"--json out.json"* ]] && files="${files:+$files }out.json"
    if [ "$mode" = serve ]; then serve_one "$v"; else run_one "$v" "$files"; fi
  done
done
for j in "${!K[@]}"; do
  [ -n "${SEEN[$j]:-}" ] || { echo "FAIL  stale: \"${K[$j]}\" is in the table but no longer in the README"; fail=1; }
done
echo "ci/readme-commands.sh: ${#CMDS[@]} README commands: $n_run runs of them (variants included) passed, $n_skip skipped" \
     "with reasons; $(( $(date +%s) - t_start )) s; $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
