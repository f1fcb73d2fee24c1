#!/usr/bin/env bash
# ci/bench-serve.sh: load benchmark for `gauntlet serve` (a benchmark, not a test).
# Starts the server on 127.0.0.1 with a free port, runs CLIENTS concurrent
# keep-alive clients (python3 stdlib) for DURATION seconds, each posting
# completions back to back, then stops the server with SIGTERM. Reports
# requests/s and p50/p90/p99 latency; exits 1 when any request failed (not a
# 200, or not a well-formed completion) or the server did not exit cleanly.
#   usage: ci/bench-serve.sh [MODEL]   (default ../shared/models/stories260K.gguf)
#   env:   GT_BUILD_DIR (build), CLIENTS (16), DURATION (30), MAX_TOKENS (16),
#          BACKEND (reference), STREAM (0; 1 = every other request streams)
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${GT_BUILD_DIR:-build}
MODEL=${1:-../shared/models/stories260K.gguf}
CLIENTS=${CLIENTS:-16}
DURATION=${DURATION:-30}
MAX_TOKENS=${MAX_TOKENS:-16}
BACKEND=${BACKEND:-reference}
STREAM=${STREAM:-0}

[ -x "$BUILD/gauntlet" ] || { echo "ci/bench-serve.sh: $BUILD/gauntlet not built" >&2; exit 2; }
[ -f "$MODEL" ] || { echo "ci/bench-serve.sh: no model at $MODEL" >&2; exit 2; }

log=$(mktemp)
"$BUILD/gauntlet" serve -m "$MODEL" -b "$BACKEND" --port 0 --queue $((CLIENTS * 2)) -q 2>"$log" &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; rm -f "$log"; }
trap cleanup EXIT

port=""
for _ in $(seq 100); do  # 10 s
  port=$(sed -n 's/^listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log")
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "ci/bench-serve.sh: server did not start" >&2; cat "$log" >&2; exit 1; }

rc=0
python3 - "$port" "$CLIENTS" "$DURATION" "$MAX_TOKENS" "$STREAM" <<'PY' || rc=1
import http.client, json, sys, threading, time

port, clients, duration, max_tokens, stream = (int(sys.argv[1]), int(sys.argv[2]),
                                               float(sys.argv[3]), int(sys.argv[4]),
                                               sys.argv[5] == "1")
prompts = ["Once upon a time", "The little dog", "One day, Lily", "Tom and his mom"]
lock = threading.Lock()
lat, errors, tokens = [], [], [0]
end = time.monotonic() + duration

def client(i):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    n = 0
    while time.monotonic() < end:
        s = stream and n % 2 == 1
        body = json.dumps({"prompt": prompts[(i + n) % len(prompts)], "max_tokens": max_tokens,
                           "temperature": 0.8, "seed": i * 100000 + n, "stream": s})
        n += 1
        t0 = time.monotonic()
        try:
            conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            dt = time.monotonic() - t0
            if r.status != 200:
                raise RuntimeError("HTTP %d: %s" % (r.status, data[:200]))
            if s:
                events = [e for e in data.decode().split("\n\n") if e]
                if events[-1] != "data: [DONE]" or any('"error"' in e for e in events):
                    raise RuntimeError("bad stream: %r" % data[-200:])
                k = len(events) - 2
            else:
                k = json.loads(data)["usage"]["completion_tokens"]
            with lock:
                lat.append(dt)
                tokens[0] += k
        except Exception as e:  # every failure is counted and shown
            with lock:
                errors.append(repr(e))
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.close()

t0 = time.monotonic()
threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
for t in threads: t.start()
for t in threads: t.join()
wall = time.monotonic() - t0
lat.sort()
def pct(p): return lat[min(len(lat) - 1, int(p / 100.0 * len(lat)))] * 1000 if lat else float("nan")
print("bench-serve: %d clients, %.1f s, max_tokens %d%s" %
      (clients, wall, max_tokens, ", half streamed" if stream else ""))
print("  requests: %d ok, %d errors; %.1f requests/s; %.0f generated tokens/s" %
      (len(lat), len(errors), len(lat) / wall, tokens[0] / wall))
print("  latency ms: p50 %.1f  p90 %.1f  p99 %.1f  max %.1f" %
      (pct(50), pct(90), pct(99), lat[-1] * 1000 if lat else float("nan")))
for e in errors[:5]:
    print("  error:", e)
sys.exit(1 if errors or not lat else 0)
PY

kill -TERM "$pid"
for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then
  echo "ci/bench-serve.sh: server did not stop within 20 s of SIGTERM" >&2; rc=1
elif ! wait "$pid"; then
  echo "ci/bench-serve.sh: server exited non-zero" >&2; cat "$log" >&2; rc=1
fi
exit $rc
