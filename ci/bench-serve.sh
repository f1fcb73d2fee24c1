#!/usr/bin/env bash
# ci/bench-serve.sh: `gauntlet serve` under concurrent load, serial against
# continuous batching and against llama.cpp's llama-server, in one run (a
# benchmark, not a test).
#
# Starts on 127.0.0.1: `gauntlet serve --parallel 1` (one request at a
# time), `gauntlet serve --parallel P` and, when the peer is built (bash
# ci/peer-llamacpp.sh), llama-server -np P with P slots of CTX positions
# each (-c P*CTX) and prompt caching off per request (gauntlet has none).
# Each is driven with 1, 4 and 16 concurrent keep-alive clients (python3
# stdlib), interleaved server by server at each client count, every client
# posting from a fixed prompt set at temperature 0 with a fixed max_tokens
# until REQUESTS answers are in. Prints requests/s and generated tokens/s
# per server and client count, and the ratios parallel/serial and
# gauntlet/llama-server measured in the same run. Checks that every
# temperature-0 answer of --parallel P equals --parallel 1's for the same
# prompt (batch invariance over HTTP) and says so.
# Exits 1 when a request failed, the answers differ, or a server did not
# start or stop cleanly; 2 when something it needs is missing.
#   usage: ci/bench-serve.sh [MODEL]   (default: SmolLM2-135M Q8_0, made with
#                                       `gauntlet quantize` as ci/bench.sh does)
#   env:   GT_BUILD_DIR (build), GT_BENCH_DIR (derived models, as ci/bench.sh),
#          GT_SMOLLM2 (skip the fetch), BACKEND (cpu), THREADS (2),
#          PARALLEL (4), CLIENTS ("1 4 16"), REQUESTS (32 per run),
#          MAX_TOKENS (32), CTX (512 per slot), DRIVER (a driver profile
#          setting for both gauntlet servers, e.g. DRIVER=act=q8 for the cpu
#          backend's 8-bit activations), LLAMA_ARGS (extra llama-server
#          arguments; on a shared, oversubscribed machine its spin-waiting
#          threads collapse, and LLAMA_ARGS="--poll 0" makes them sleep)
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${GT_BUILD_DIR:-build}
G="$BUILD/gauntlet"
BACKEND=${BACKEND:-cpu}
THREADS=${THREADS:-2}
PARALLEL=${PARALLEL:-4}
CLIENTS=${CLIENTS:-"1 4 16"}
REQUESTS=${REQUESTS:-32}
MAX_TOKENS=${MAX_TOKENS:-32}
CTX=${CTX:-512}
DRIVER=${DRIVER:-}
driver=()
[ -z "$DRIVER" ] || driver=(--driver "$DRIVER")
read -r -a LLAMA_EXTRA <<<"${LLAMA_ARGS:-}"
[ -x "$G" ] || { echo "ci/bench-serve.sh: $G not built (run ci/setup.sh first)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "ci/bench-serve.sh: python3 is needed" >&2; exit 2; }

MODEL=${1:-}
if [ -z "$MODEL" ]; then
  DIR=${GT_BENCH_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gauntlet/bench}
  MODEL="$DIR/SmolLM2-135M-Instruct.q8_0.gguf"
  if [ ! -s "$MODEL" ]; then
    smol=${GT_SMOLLM2:-}
    [ -n "$smol" ] || smol=$(bash ci/fetch-smollm2.sh) ||
      { echo "ci/bench-serve.sh: SmolLM2 unavailable" >&2; exit 2; }
    mkdir -p "$DIR"
    "$G" quantize --quiet "$smol" "$MODEL.part" q8_0 >&2 && mv "$MODEL.part" "$MODEL"
  fi
fi
[ -f "$MODEL" ] || { echo "ci/bench-serve.sh: no model at $MODEL" >&2; exit 2; }

tmp=$(mktemp -d /tmp/gt-bench-serve.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# gauntlet NAME PARALLEL: starts it (in this shell, so the trap can kill
# it), sets port.
start_gauntlet() {
  local name=$1 np=$2
  port=""
  : >"$tmp/$name.log" # before the child opens it, so the first poll finds it
  "$G" serve -m "$MODEL" -b "$BACKEND" -t "$THREADS" -c "$CTX" --parallel "$np" --port 0 \
    --queue 64 -q "${driver[@]}" </dev/null >/dev/null 2>"$tmp/$name.log" &
  pids+=($!)
  echo $! >"$tmp/$name.pid"
  for _ in $(seq 300); do # 30 s
    port=$(sed -n 's/^listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$name.log")
    [ -n "$port" ] && return 0
    kill -0 "$(cat "$tmp/$name.pid")" 2>/dev/null || break
    sleep 0.1
  done
  echo "ci/bench-serve.sh: $name did not start:" >&2
  cat "$tmp/$name.log" >&2
  return 1
}

servers=()
start_gauntlet serial 1 || exit 1
servers+=("gauntlet-p1=$port")
start_gauntlet parallel "$PARALLEL" || exit 1
servers+=("gauntlet-p$PARALLEL=$port")

peer=""
if peer=$(bash ci/peer-llamacpp.sh --where 2>/dev/null | awk '$1 == "llama-server" {print $2}') &&
   [ -n "$peer" ]; then
  lport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$peer" -m "$MODEL" --host 127.0.0.1 --port "$lport" -t "$THREADS" -tb "$THREADS" \
    -np "$PARALLEL" -c $((PARALLEL * CTX)) --no-webui ${LLAMA_EXTRA[@]+"${LLAMA_EXTRA[@]}"} </dev/null >"$tmp/llama-server.log" 2>&1 &
  pids+=($!)
  lpid=$!
  ok=""
  for _ in $(seq 300); do # 30 s
    if python3 -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:$lport/health', timeout=2).status == 200 else 1)" 2>/dev/null; then
      ok=1; break
    fi
    kill -0 "$lpid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$ok" ]; then
    echo "ci/bench-serve.sh: llama-server did not start:" >&2
    tail -20 "$tmp/llama-server.log" >&2
    exit 1
  fi
  servers+=("llama-server-np$PARALLEL=$lport")
else
  peer=""
fi

echo "bench-serve: $(basename "$MODEL") on $BACKEND${DRIVER:+ ($DRIVER)}, $THREADS threads, $CTX positions per slot," \
     "$REQUESTS requests per run, max_tokens $MAX_TOKENS, temperature 0${LLAMA_ARGS:+, llama-server $LLAMA_ARGS}"
echo "  load average before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
[ -n "$peer" ] || echo "  (llama-server: skipped: peer not built; run ci/peer-llamacpp.sh)"

rc=0
python3 - "$REQUESTS" "$MAX_TOKENS" "$CLIENTS" "$PARALLEL" "${servers[@]}" <<'PY' || rc=1
import http.client, json, sys, threading, time

requests, max_tokens = int(sys.argv[1]), int(sys.argv[2])
clients_list = [int(c) for c in sys.argv[3].split()]
parallel = int(sys.argv[4])
servers = [s.split("=", 1) for s in sys.argv[5:]]
prompts = ["The capital of France is", "Once upon a time, in a small village,",
           "Here is a recipe for pancakes:", "The three laws of thermodynamics are",
           "def fibonacci(n):", "My favourite season is autumn because",
           "The history of the printing press", "In a galaxy far away,"]

def post(conn, name, prompt):
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    if name.startswith("llama-server"):
        body["cache_prompt"] = False  # gauntlet serve keeps no prompt cache
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError("HTTP %d: %s" % (r.status, data[:200]))
    o = json.loads(data)
    return o["choices"][0]["text"], o["usage"]["completion_tokens"]

def run(name, port, clients):
    lock = threading.Lock()
    nxt, done, tokens, errors, answers = [0], [0], [0], [], {}
    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        while True:
            with lock:
                if nxt[0] >= requests:
                    break
                i = nxt[0]
                nxt[0] += 1
            p = prompts[i % len(prompts)]
            try:
                text, k = post(conn, name, p)
                with lock:
                    done[0] += 1
                    tokens[0] += k
                    answers.setdefault(p, set()).add(text)
            except Exception as e:  # every failure is counted and shown
                with lock:
                    errors.append(repr(e))
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        conn.close()
    t0 = time.monotonic()
    th = [threading.Thread(target=client) for _ in range(clients)]
    for t in th: t.start()
    for t in th: t.join()
    wall = time.monotonic() - t0
    return {"rps": done[0] / wall, "tps": tokens[0] / wall, "errors": errors,
            "answers": answers, "done": done[0]}

# Warm-up: one request each (page-in, first-touch allocations).
for name, port in servers:
    post(http.client.HTTPConnection("127.0.0.1", int(port), timeout=300), name, prompts[0])

res = {}
for c in clients_list:
    for name, port in servers:  # interleaved: drift in the machine's load hits all alike
        res[(name, c)] = run(name, int(port), c)
        print("  %s, %d clients: %.2f requests/s" % (name, c, res[(name, c)]["rps"]),
              file=sys.stderr, flush=True)

names = [n for n, _ in servers]
print("| server | clients | requests/s | tokens/s | ok | errors |")
print("|---|---:|---:|---:|---:|---:|")
for c in clients_list:
    for n in names:
        r = res[(n, c)]
        print("| %s | %d | %.2f | %.1f | %d | %d |" % (n, c, r["rps"], r["tps"], r["done"], len(r["errors"])))
ser, par = names[0], names[1]
peer = names[2] if len(names) > 2 else None
print()
print("| clients | parallel/serial req/s | parallel/serial tok/s |%s" %
      (" gauntlet/llama-server req/s | gauntlet/llama-server tok/s |" if peer else ""))
print("|---:|---:|---:|%s" % ("---:|---:|" if peer else ""))
for c in clients_list:
    line = "| %d | %.2fx | %.2fx |" % (c, res[(par, c)]["rps"] / res[(ser, c)]["rps"],
                                      res[(par, c)]["tps"] / res[(ser, c)]["tps"])
    if peer:
        line += " %.2fx | %.2fx |" % (res[(par, c)]["rps"] / res[(peer, c)]["rps"],
                                      res[(par, c)]["tps"] / res[(peer, c)]["tps"])
    print(line)

failed = False
for (n, c), r in res.items():
    for e in r["errors"][:3]:
        print("error: %s, %d clients: %s" % (n, c, e))
    failed |= bool(r["errors"])
# Batch invariance: one answer per prompt across every run of both gauntlet
# servers (a run at 16 clients against the same prompt alone at 1 client).
bad = []
for p in prompts:
    texts = set()
    for n in (ser, par):
        for c in clients_list:
            texts |= res[(n, c)]["answers"].get(p, set())
    if len(texts) != 1:
        bad.append((p, texts))
print()
if bad:
    for p, t in bad:
        print("DIFFER: %r: %d different answers: %s" % (p, len(t), [x[:60] for x in t]))
    print("temperature-0 answers: --parallel %d differs from --parallel 1 on %d of %d prompts"
          % (parallel, len(bad), len(prompts)))
    failed = True
else:
    print("temperature-0 answers: --parallel %d == --parallel 1 on all %d prompts, at %s clients"
          % (parallel, len(prompts), "/".join(map(str, clients_list))))
sys.exit(1 if failed else 0)
PY

# Stop the gauntlet servers as a user would and check they exit cleanly.
for name in serial parallel; do
  p=$(cat "$tmp/$name.pid")
  kill -TERM "$p"
  for _ in $(seq 200); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$p" 2>/dev/null; then
    echo "ci/bench-serve.sh: gauntlet serve ($name) did not stop within 20 s of SIGTERM" >&2; rc=1
  elif ! wait "$p"; then
    echo "ci/bench-serve.sh: gauntlet serve ($name) exited non-zero" >&2; tail -5 "$tmp/$name.log" >&2; rc=1
  fi
done
exit $rc
