#!/usr/bin/env python3
"""fault_proxy.py: a proxy in front of `gauntlet serve` with one fault, for
test_http_suites (the accuracy suite must catch each):

  usage: fault_proxy.py UPSTREAM_PORT invent|inflate|demote|forget=N|
                        end=EOS,X|end=EOS,@N|badid=N|wrongid=N
  invent    every position's logprobs keep their top-1 and replace the other
            alternatives by invented tokens ("zzq1x", ...) just below it, so
            the probabilities sum to far more than 1; the top-1 is still
            right, so the drift scores alone see nothing.
  inflate   the same with the real tokens: each alternative just below the
            top-1, the probabilities summing to far more than 1.
  demote    the two best alternatives trade logprobs, so a token generated
            at temperature 0 is not the top alternative.
  forget=N  a completion of more than N tokens without echo (the decode
            path) is faithful for its first N tokens; after that each token
            is generated as if the K/V cache had stopped being written: the
            upstream continues the prompt, the first N tokens and only the
            latest one. Prompt logprobs and short generations are untouched.
The rest rewrite a decode reply (no echo, max_tokens >= 64) into
llama-server's shape: logprobs.content[i] = {id, token, logprob,
top_logprobs}, where the token id is given.
  end=EOS,X the reply stops at its first token whose id is X: that token
            becomes the end token EOS as llama-server lists it ({"id": EOS,
            "token": "", "bytes": []}), with the logprob the upstream gave
            "" there (for a model whose EOS ties X, a stop the model
            supports).
  end=EOS,@N the same at token N whatever it is (a stop the model does not
            support), its logprob claimed to be the top alternative's.
  badid=N   token N's id is 999999 (no id of the vocabulary).
  wrongid=N token N's id is the next id (a token of another name).

Prints "listening on http://127.0.0.1:PORT pid PID" on stdout, then serves
until killed.
"""
import json
import os
import sys
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

UPSTREAM = f"http://127.0.0.1:{int(sys.argv[1])}"
MODE = sys.argv[2]
FORGET = int(MODE.split("=", 1)[1]) if MODE.startswith("forget=") else None
SHAPE = MODE.split("=", 1)[0] in ("end", "badid", "wrongid")


def post(path, q):
    req = urllib.request.Request(UPSTREAM + path, data=json.dumps(q).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def corrupt(lp):
    for i, top in enumerate(lp.get("top_logprobs") or []):
        if not top:
            continue
        alts = sorted(top.items(), key=lambda kv: -kv[1])
        v = alts[0][1]
        if MODE == "invent":
            alts = [alts[0]] + [(f"zzq{k}x", v - 0.001 * k) for k in range(1, len(alts))]
        elif MODE == "inflate":
            alts = [(t, v - 0.001 * k) for k, (t, _) in enumerate(alts)]
        elif len(alts) >= 2:
            (t0, v0), (t1, v1) = alts[0], alts[1]
            alts[0], alts[1] = (t0, v1), (t1, v0)
        lp["top_logprobs"][i] = dict(alts)


def forgetful(q):
    """The decode fault: see the top. Returns (status, body)."""
    n, prompt = q["max_tokens"], q["prompt"]
    status, body = post("/v1/completions", dict(q, max_tokens=FORGET))
    if status != 200:
        return status, body
    o = json.loads(body)
    ch = o["choices"][0]
    lp = ch["logprobs"]
    kept = ch["text"]
    text, finish = kept, ch["finish_reason"]
    while finish == "length" and len(lp["tokens"]) < n:
        last = lp["tokens"][-1] if len(lp["tokens"]) > FORGET else ""
        s, b = post("/v1/completions", dict(q, prompt=prompt + kept + last, max_tokens=1))
        if s != 200:
            return s, b
        step = json.loads(b)["choices"][0]
        finish = step["finish_reason"]
        if not step["logprobs"]["tokens"]:
            break
        for k in ("tokens", "token_logprobs", "top_logprobs", "token_ids"):
            lp.setdefault(k, []).append(step["logprobs"][k][0])
        lp.setdefault("text_offset", []).append(len(text))
        text += step["logprobs"]["tokens"][0]
    ch["text"], ch["finish_reason"] = text, finish
    o["usage"]["completion_tokens"] = len(lp["tokens"])
    o["usage"]["total_tokens"] = o["usage"]["prompt_tokens"] + len(lp["tokens"])
    return 200, json.dumps(o).encode()


def llama_shape(o):
    """A decode reply in llama-server's shape, with MODE's change (see the top)."""
    ch = o["choices"][0]
    lp = ch["logprobs"]
    content = []
    for k, (tok, tid, v) in enumerate(zip(lp["tokens"], lp["token_ids"], lp["token_logprobs"])):
        alts = sorted((lp["top_logprobs"][k] or {}).items(), key=lambda kv: -kv[1])
        content.append({"id": tid, "token": tok, "logprob": v,
                        "top_logprobs": [{"token": t, "logprob": a} for t, a in alts]})
    kind, arg = MODE.split("=", 1)
    if kind == "end":
        eos, where = arg.split(",")
        cut = None
        if where.startswith("@"):
            cut = int(where[1:])
            lp_end = content[cut]["top_logprobs"][0]["logprob"]
        else:
            for k, e in enumerate(content):
                top = dict((a["token"], a["logprob"]) for a in e["top_logprobs"])
                if e["id"] == int(where) and "" in top:
                    cut, lp_end = k, top[""]
                    break
        if cut is not None:
            content[cut].update(id=int(eos), token="", bytes=[], logprob=lp_end)
            del content[cut + 1:]
            ch["text"] = "".join(e["token"] for e in content)
            ch["finish_reason"] = "stop"
            o["usage"]["completion_tokens"] = len(content)
    else:
        k = int(arg)
        content[k]["id"] = 999999 if kind == "badid" else content[k]["id"] + 1
    ch["logprobs"] = {"content": content}
    return o


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def relay(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        try:
            with urllib.request.urlopen(UPSTREAM + self.path, timeout=60) as r:
                self.relay(r.status, r.read())
        except urllib.error.HTTPError as e:
            self.relay(e.code, e.read())

    def do_POST(self):
        q = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        decode = (FORGET is not None and self.path == "/v1/completions" and not q.get("echo")
                  and not q.get("stream") and isinstance(q.get("max_tokens"), int)
                  and q["max_tokens"] > FORGET)
        status, body = forgetful(q) if decode else post(self.path, q)
        if SHAPE:
            if (status == 200 and self.path == "/v1/completions" and not q.get("echo")
                    and not q.get("stream") and q.get("max_tokens", 0) >= 64):
                body = json.dumps(llama_shape(json.loads(body))).encode()
        elif status == 200 and FORGET is None:
            o = json.loads(body)
            for ch in o.get("choices", []):
                if ch.get("logprobs"):
                    corrupt(ch["logprobs"])
            body = json.dumps(o).encode()
        self.relay(status, body)


srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
srv.daemon_threads = True
print(f"listening on http://127.0.0.1:{srv.server_address[1]} pid {os.getpid()}", flush=True)
try:
    srv.serve_forever()
except KeyboardInterrupt:
    pass
