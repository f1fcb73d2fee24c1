#!/usr/bin/env python3
"""noecho_proxy.py: a proxy in front of `gauntlet serve` that answers as
llama-server does, for test_http_suites: it ignores "echo" (so no prompt
logprobs come back) and gives logprobs in the chat shape
{"content": [{token, logprob, top_logprobs: [{token, logprob}]}]}.

  usage: noecho_proxy.py UPSTREAM_PORT [faithful|swap]
  swap: each token's two best alternatives trade logprobs, a server whose
        top-1 is never the reference's and whose KL is far from 0.

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
SWAP = len(sys.argv) > 2 and sys.argv[2] == "swap"


def chat_shape(lp):
    content = []
    for tok, own, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]):
        alts = sorted((top or {}).items(), key=lambda kv: -kv[1])
        if SWAP and len(alts) >= 2:
            (t0, v0), (t1, v1) = alts[0], alts[1]
            alts[0], alts[1] = (t0, v1), (t1, v0)
        content.append({"token": tok, "logprob": own,
                        "top_logprobs": [{"token": t, "logprob": v} for t, v in alts]})
    return {"content": content}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def relay(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def forward(self, data=None):
        req = urllib.request.Request(UPSTREAM + self.path, data=data,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def do_GET(self):
        self.relay(*self.forward())

    def do_POST(self):
        q = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        q.pop("echo", None)
        status, body = self.forward(json.dumps(q).encode())
        if status == 200:
            o = json.loads(body)
            for ch in o.get("choices", []):
                if ch.get("logprobs"):
                    ch["logprobs"] = chat_shape(ch["logprobs"])
            body = json.dumps(o).encode()
        self.relay(status, body)


srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
srv.daemon_threads = True
print(f"listening on http://127.0.0.1:{srv.server_address[1]} pid {os.getpid()}", flush=True)
try:
    srv.serve_forever()
except KeyboardInterrupt:
    pass
