#!/usr/bin/env python3
"""deviant_server.py: an OpenAI-style completions server that deviates on
purpose, for test_http_suites: the functional suite must name each deviation
within its deadline.

  max_tokens -1           accepted, then 20 s of "generating" before a 200
  model not "deviant"     answered 200 (OpenAI: 404)
  temperature < 0         422 with an error object (OpenAI: 400)
  anything else invalid   400 with an error object (as OpenAI)
  a valid request         200: max_tokens words, cut at a stop string

Prints "listening on http://127.0.0.1:PORT pid PID" on stdout, then serves until
killed.
"""
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def completion(text, n=1, finish="length"):
    return {"id": "cmpl-1", "object": "text_completion", "created": 0, "model": "deviant",
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}],
            "usage": {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def error(self, status, msg):
        self.reply(status, {"error": {"message": msg, "type": "invalid_request_error",
                                      "param": None, "code": None}})

    def do_GET(self):
        if self.path == "/health":
            self.reply(200, {"status": "ok"})
        elif self.path == "/v1/models":
            self.reply(200, {"object": "list", "data": [{"id": "deviant", "object": "model"}]})
        else:
            self.error(404, "no route")

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(n)
        try:
            q = json.loads(raw)
        except ValueError:
            return self.error(400, "not JSON")
        if not isinstance(q, dict) or not isinstance(q.get("prompt"), str):
            return self.error(400, "'prompt' is required")
        if q.get("max_tokens") == -1:
            time.sleep(20)
            return self.reply(200, completion("a long answer"))
        if q.get("model") != "deviant":
            return self.reply(200, completion("from some model"))
        t = q.get("temperature", 1)
        if isinstance(t, (int, float)) and t < 0:
            return self.error(422, "temperature must be >= 0")
        if "stop" in q and not isinstance(q["stop"], (str, list)):
            return self.error(400, "'stop' must be a string or an array")
        if len(q["prompt"]) > 4000:  # the stand-in context
            return self.error(400, "the prompt is longer than the context")
        # A valid request: max_tokens tokens " w0 w1 ...", cut at a stop string.
        n = q.get("max_tokens", 16)
        text = "".join(f" w{i}" for i in range(n))
        stop = q.get("stop")
        for s in [stop] if isinstance(stop, str) else (stop or []):
            if s and s in text:
                text = text[:text.index(s)]
                return self.reply(200, completion(text, text.count(" w"), "stop"))
        self.reply(200, completion(text, n))


srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
srv.daemon_threads = True
print(f"listening on http://127.0.0.1:{srv.server_address[1]} pid {os.getpid()}", flush=True)
try:
    srv.serve_forever()
except KeyboardInterrupt:
    pass
