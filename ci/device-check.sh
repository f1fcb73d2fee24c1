#!/usr/bin/env bash
# ci/device-check.sh: the CUDA backend's checks on a machine with an NVIDIA
# GPU, in one go, in under 8 minutes: build for sm_90, the CUDA unit and
# op tests, `gauntlet test-ops -b cuda`, the quickstart matrix (SQLite DB +
# HTML report), and decode bandwidth of synthetic SmolLM2-135M Q8_0/Q4_0
# models as a percentage of the copy bandwidth measured in the same run.
# Everything goes to $OUT (default /tmp/devcheck): device-check.log,
# results.sqlite, report.html, summary.txt. The summary table prints last.
#
# usage: OUT=DIR ci/device-check.sh            run the checks
#        ci/device-check.sh --prepare          on a machine with network and
#            ../shared: fill .devcache/ (git-ignored) with the test models, the
#            -dev packages the build needs, and a prebuilt sm_90 tree, for a
#            GPU machine that has no network: carry .devcache there.
# Environment: GT_CUDA_ARCHS (default 90), GT_DEVCHECK_BUILD (build-gpu),
#              GT_DEVCHECK_BUDGET_S (seconds for the whole run, default 470).
#
# exit: 0 every check passed; 1 a check failed; 2 the build or setup failed;
#       3 no CUDA device (the reason is printed; the no-device checks ran).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=$ROOT/.devcache
ARCHS=${GT_CUDA_ARCHS:-90}
BUILD=${GT_DEVCHECK_BUILD:-build-gpu}
T0=$(date +%s)
DEADLINE=$((T0 + ${GT_DEVCHECK_BUDGET_S:-470}))

# --- prepare (run where the network and ../shared are) ----------------------
if [ "${1:-}" = "--prepare" ]; then
  set -e
  exclude=$(git rev-parse --git-path info/exclude)
  grep -qxF '/.devcache/' "$exclude" 2>/dev/null || echo '/.devcache/' >>"$exclude"
  mkdir -p "$CACHE/models/llamacpp-quants" "$CACHE/debs" "$CACHE/prebuilt"
  cp ../shared/models/stories260K.gguf "$CACHE/models/"
  cp ../shared/models/llamacpp-quants/*.gguf "$CACHE/models/llamacpp-quants/"
  # Headers and libraries the top-level CMakeLists asks pkg-config for.
  (cd "$CACHE/debs" && apt-get download pkgconf pkgconf-bin libpkgconf3 pkg-config \
      libsqlite3-dev libsqlite3-0 libcjson-dev libcjson1 libcurl4-openssl-dev libcurl4 \
      libmicrohttpd-dev libmicrohttpd12 check libsubunit-dev libsubunit0) ||
    echo "device-check: apt-get download failed; the GPU machine needs its own -dev packages"
  # A prebuilt tree, for when the GPU machine cannot build (missing packages).
  cmake -S . -B build-gpu-prep -DCMAKE_BUILD_TYPE=Release -DGT_CUDA=ON -DGT_CUDA_ARCHS="$ARCHS" \
        -DGT_OPENCL=OFF >/dev/null
  cmake --build build-gpu-prep -j"$(nproc)" --target gt-backend-cuda gt-cuda-bwprobe test_cuda
  cmake --build build-gpu-prep -j"$(nproc)" --target gauntlet ||
    echo "device-check: gauntlet did not build; the prebuilt tree has the CUDA tests only"
  P=$CACHE/prebuilt
  for f in gauntlet libgtrt.so libgt-backend-cuda.so test_cuda gt-cuda-bwprobe; do
    [ -f "build-gpu-prep/$f" ] && cp "build-gpu-prep/$f" "$P/"
  done
  # Bundle the non-system libraries they use (not glibc, the C++ runtime or CUDA).
  for f in "$P"/*; do ldd "$f" 2>/dev/null; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' |
    sort -u | grep -vE '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|ld-linux[^/]*|libcuda|libcudart|libcublas[^/]*)\.so' |
    grep -v "/build-gpu-prep/" | while read -r lib; do cp -L "$lib" "$P/"; done
  du -sh "$CACHE"
  echo "device-check: prepared $CACHE; on the GPU machine run: bash ci/device-check.sh (carry .devcache)"
  exit 0
fi

# --- the run ----------------------------------------------------------------
OUT=${OUT:-/tmp/devcheck}
mkdir -p "$OUT"
LOG=$OUT/device-check.log

declare -a ROWS=()
FAILED=0
row() { ROWS+=("$(printf '%-22s %-6s %s' "$1" "$2" "$3")"); [ "$2" = FAIL ] && FAILED=1; return 0; }
left() { echo $((DEADLINE - $(date +%s))); }
# A step's timeout: what it asks for, at most what is left of the budget.
budget() { local l; l=$(left); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
say() { echo; echo "=== $* ($(( $(date +%s) - T0 )) s)"; }
summary() {
  {
    echo
    echo "device-check summary (${1}; $(( $(date +%s) - T0 )) s; log $LOG)"
    printf '%-22s %-6s %s\n' check result detail
    for r in "${ROWS[@]}"; do echo "$r"; done
  } | tee "$OUT/summary.txt"
}

export PATH="$PATH:/usr/local/cuda/bin"
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64:/usr/local/cuda/lib"
MODELS=""
for d in "$CACHE/models" "$ROOT/../shared/models"; do
  [ -f "$d/stories260K.gguf" ] && { MODELS=$(cd "$d" && pwd); break; }
done
if [ -n "$MODELS" ]; then
  export GT_MODEL_DIR=$MODELS GT_MODEL_MIRROR=$MODELS
else
  echo "device-check: stories260K.gguf not found (.devcache/models or ../shared/models):"
  echo "  model tests will skip; run ci/device-check.sh --prepare and carry .devcache"
fi

# Unpacks carried .deb files into a prefix when pkg-config lacks the build's packages.
use_debs() {
  ls "$CACHE"/debs/*.deb >/dev/null 2>&1 || return 1
  local D=/tmp/gt-devdeps
  rm -rf "$D" && mkdir -p "$D"
  for f in "$CACHE"/debs/*.deb; do dpkg-deb -x "$f" "$D" || return 1; done
  # Point the .pc files at the prefix; drop Requires.private (static links
  # only), which would name -dev packages (gnutls, ...) nobody needs here.
  find "$D" -name '*.pc' -exec sed -i "s|=/usr|=$D/usr|g; s|-I/usr|-I$D/usr|g; s|-L/usr|-L$D/usr|g;
    /^Requires.private:/d" {} +
  local M=$D/usr/lib/x86_64-linux-gnu
  export PATH="$PATH:$D/usr/bin"
  export PKG_CONFIG_PATH="$M/pkgconfig:$D/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$M:$LD_LIBRARY_PATH" LIBRARY_PATH="$M${LIBRARY_PATH:+:$LIBRARY_PATH}"
  echo "device-check: using carried packages from $CACHE/debs (unpacked in $D)"
}

configure() {
  timeout "$(budget 120)" cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DGT_CUDA=ON \
    -DGT_CUDA_ARCHS="$ARCHS" -DGT_OPENCL=OFF -DGT_WERROR=OFF
}

run_checks() {
say "build (sm_$ARCHS) into $BUILD"
BIN=$ROOT/$BUILD
if ! command -v nvcc >/dev/null; then
  echo "device-check: nvcc not found (PATH, /usr/local/cuda/bin)"
  built=no
elif configure || { use_debs && rm -f "$BUILD/CMakeCache.txt" && configure; }; then
  if timeout "$(budget 300)" cmake --build "$BUILD" -j"$(nproc)" \
       --target gt-backend-cuda gt-cuda-bwprobe test_cuda; then
    built=yes
    timeout "$(budget 200)" cmake --build "$BUILD" -j"$(nproc)" --target gauntlet ||
      echo "device-check: the gauntlet program did not build (the CUDA tests still run)"
  else
    built=no
  fi
else
  built=no
fi
if [ "$built" = yes ]; then
  row build PASS "cmake -DGT_CUDA=ON -DGT_CUDA_ARCHS=$ARCHS into $BUILD"
  ldd "$BIN/libgt-backend-cuda.so" | grep -E "cudart|cublas|libcuda\.so" | sed 's/^/  plugin needs: /'
  if [ -x "$BIN/gauntlet" ] && ldd "$BIN/gauntlet" | grep -qE "libcuda|libcudart|libcublas"; then
    row "gauntlet links CUDA" FAIL "the program must reach CUDA only through the plugin"
  fi
elif [ -x "$CACHE/prebuilt/test_cuda" ]; then
  BIN=$CACHE/prebuilt
  export LD_LIBRARY_PATH="$BIN:$LD_LIBRARY_PATH"
  row build WARN "could not build here; using the prebuilt tree in $BIN"
else
  row build FAIL "see the log; no prebuilt tree to fall back on (ci/device-check.sh --prepare)"
  summary "build failed"
  exit 2
fi
export GT_BACKEND_PATH=$BIN
G=$BIN/gauntlet
have_verb() { [ -x "$G" ] && ! "$G" "$1" --help 2>&1 | grep -q "not built into this binary"; }

say "device"
bw=$(timeout "$(budget 60)" "$BIN/gt-cuda-bwprobe" 0 1024); bw_rc=$?
echo "$bw"
COPY=$(echo "$bw" | sed -n 's/^GT_BW copy=\([0-9.]*\) read=.*/\1/p')
READ=$(echo "$bw" | sed -n 's/^GT_BW copy=[0-9.]* read=\([0-9.]*\)/\1/p')

say "test_cuda (profile parser, registry, and on a device every op vs the reference)"
tout=$(CK_VERBOSITY=normal timeout "$(budget 240)" "$BIN/test_cuda" 2>&1); t_rc=$?
echo "$tout"
reason=$(echo "$tout" | sed -n 's/^cuda device tests skipped: no device: //p' | head -1)
if [ $t_rc -eq 0 ]; then
  row test_cuda PASS "$(echo "$tout" | grep -E '^[0-9]+%: Checks' | tail -1)"
else
  row test_cuda FAIL "exit $t_rc: $(echo "$tout" | grep -E ':[FE]:' | head -1 | cut -c1-150)"
fi

if [ $bw_rc -eq 3 ] || [ -n "$reason" ]; then
  echo
  echo "no CUDA device: ${reason:-$(echo "$bw" | sed -n 's/^no CUDA device: //p')}"
  row device SKIP "no CUDA device: ${reason:-see the log}"
  summary "no device"
  [ $FAILED -ne 0 ] && exit 1
  exit 3
fi
if [ $bw_rc -ne 0 ] || [ -z "$COPY" ]; then
  row bandwidth FAIL "gt-cuda-bwprobe exit $bw_rc"
else
  row bandwidth PASS "copy $COPY GB/s, read $READ GB/s (measured now)"
fi

say "gauntlet test-ops -b cuda"
if have_verb test-ops; then
  timeout "$(budget 120)" "$G" test-ops -b cuda --failures; rc=$?
  [ $rc -eq 0 ] && row test-ops PASS "every op and type within tolerance" ||
    row test-ops FAIL "exit $rc"
else
  row test-ops SKIP "gauntlet test-ops is not built into this binary"
fi

say "gauntlet qualify matrices/quickstart.json"
if have_verb qualify && [ -f matrices/quickstart.json ]; then
  rm -f "$OUT/results.sqlite" "$OUT/report.html"
  q=(qualify matrices/quickstart.json --db "$OUT/results.sqlite" --cache-dir /tmp/gt-devcheck-cache
     --no-progress)
  qout=$(timeout "$(budget 180)" "$G" "${q[@]}" --html "$OUT/report.html" 2>&1); rc=$?
  if [ $rc -eq 2 ] && echo "$qout" | grep -q -- "--html is not yet implemented"; then
    echo "(qualify has no --html yet: qualify, then gauntlet report --html)"
    qout=$(timeout "$(budget 180)" "$G" "${q[@]}" 2>&1); rc=$?
    if [ -f "$OUT/results.sqlite" ] && have_verb report; then
      timeout "$(budget 60)" "$G" report --db "$OUT/results.sqlite" --html "$OUT/report.html" ||
        echo "(gauntlet report --html failed)"
    fi
  fi
  echo "$qout"
  # The quickstart gate allows cuda cells to skip (no device), so its exit
  # code alone says nothing about CUDA: this check passes only when cuda
  # cells ran, and every one that ran passed.
  cuda_ran=0 cuda_pass=0 cuda_skip=0 cuda_why=""
  if command -v sqlite3 >/dev/null && [ -f "$OUT/results.sqlite" ]; then
    q1() { sqlite3 "$OUT/results.sqlite" "$1" 2>/dev/null; }
    cuda_ran=$(q1 "SELECT COUNT(*) FROM cells WHERE backend = 'cuda' AND status NOT IN ('skip','pending')")
    cuda_pass=$(q1 "SELECT COUNT(*) FROM cells WHERE backend = 'cuda' AND status = 'pass'")
    cuda_skip=$(q1 "SELECT COUNT(*) FROM cells WHERE backend = 'cuda' AND status = 'skip'")
    cuda_why=$(q1 "SELECT reason FROM cells WHERE backend = 'cuda' AND status = 'skip' LIMIT 1" | cut -c1-120)
  else
    cuda_why="cannot count cuda cells (no sqlite3 CLI or no results database)"
  fi
  if [ $rc -ne 0 ]; then
    row qualify FAIL "quickstart gate exit $rc"
  elif [ "${cuda_ran:-0}" -eq 0 ]; then
    row qualify FAIL "no cuda cell ran (${cuda_skip:-?} skipped: $cuda_why)"
  elif [ "$cuda_pass" -ne "$cuda_ran" ]; then
    row qualify FAIL "$cuda_pass of $cuda_ran cuda cells passed"
  else
    row qualify PASS "quickstart gate passed; $cuda_pass cuda cells ran and passed, $cuda_skip skipped"
  fi
  [ -f "$OUT/report.html" ] || echo "(no HTML report was written)"
else
  row qualify SKIP "gauntlet qualify or matrices/quickstart.json is missing"
fi

say "decode bandwidth (synthetic smollm2-135m)"
# tok/s of a decode run (MODEL [DRIVER-PROFILE]): from `gauntlet bench` when
# it exists, else from `gauntlet generate`'s timing line.
decode_tps() {
  local m=$1 out drv=()
  [ -n "${2:-}" ] && drv=(--driver "$2")
  if have_verb bench; then
    out=$(timeout "$(budget 90)" "$G" bench -b cuda -m "$m" "${drv[@]}" 2>&1); echo "$out" >&2
    echo "$out" | grep -iE "decode|tg" | grep -oE "[0-9]+(\.[0-9]+)? *tok/s" | head -1 | grep -oE "^[0-9.]+"
  elif have_verb generate; then
    out=$(timeout "$(budget 90)" "$G" generate -b cuda -m "$m" -p "Once upon a time" -n 256 \
          --ignore-eos "${drv[@]}" 2>&1 >/dev/null); echo "$out" >&2
    echo "$out" | sed -n 's/.*generated [0-9]* tok, \([0-9.]*\) tok\/s.*/\1/p' | head -1
  fi
}
if have_verb synth; then
  for ty in q8_0 q4_0; do
    m=/tmp/gt-devcheck-smollm2-$ty.gguf
    [ -f "$m" ] || timeout "$(budget 120)" "$G" synth "$m" --preset smollm2-135m --type $ty ||
      { row "decode $ty" FAIL "gauntlet synth failed"; continue; }
    # Bytes read per decoded token ~ the file (every matrix once, embeddings
    # tied); the tokenizer's share of the file is about 1%.
    bytes=$(stat -c %s "$m")
    for prof in "" "graphs=on"; do
      name="decode $ty${prof:+ $prof}"
      tps=$(decode_tps "$m" "$prof")
      if [ -n "$tps" ] && [ -n "$COPY" ]; then
        row "$name" INFO "$(awk -v t="$tps" -v b="$bytes" -v c="$COPY" -v r="${READ:-0}" 'BEGIN {
          gbs = t * b / 1e9; printf "%.1f tok/s = %.1f GB/s = %.1f%% of copy (%.1f%% of read) bandwidth", t, gbs, 100 * gbs / c, r > 0 ? 100 * gbs / r : 0 }')"
      else
        row "$name" FAIL "no decode speed (bench/generate output above)"
      fi
    done
  done
else
  row decode SKIP "gauntlet synth is not built into this binary"
fi

summary "device"
exit $FAILED
}

# Everything is logged; the exit code is run_checks'.
run_checks 2>&1 | tee "$LOG"
exit "${PIPESTATUS[0]}"
