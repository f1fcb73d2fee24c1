#!/usr/bin/env python3
"""Regenerates tests/vectors/qwen_llamacpp.json: llama.cpp's greedy tokens and
top-10 log-probabilities on the synthetic qwen2-tiny and qwen3-tiny models.

usage: qwen_llamacpp.py GAUNTLET LLAMA_SERVER OUT.json

For each preset it writes the model with `gauntlet synth --arch A --preset P`
(seed 1, f32), starts llama-server on it with F32 K/V and flash attention off
(llama.cpp's CPU flash attention rounds through f16, ~3e-3 in the logits),
and for each prompt (token ids, so no tokenizer is involved) asks for 32
greedy tokens with the 10 most likely tokens' log-probabilities before
sampling at every step. tests/test_qwen.c compares the reference backend
with them. Standard library only."""
import json, os, socket, subprocess, sys, tempfile, time, urllib.request

PRESETS = [("qwen2", "qwen2-tiny"), ("qwen3", "qwen3-tiny")]
# "<s> Once upon a time" and "<s> The quick brown fox" in the synth vocabulary
PROMPTS = [[1, 259, 306, 337, 395, 504, 360, 413, 259, 364, 386],
           [1, 373, 259, 348, 350, 410, 259, 334, 291]]
N_GEN, N_PROBS = 32, 10


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=120))


def peer_commit(server):
    out = subprocess.run([server, "--version"], capture_output=True, text=True)
    for line in (out.stdout + out.stderr).splitlines():
        if "version" in line:
            return line.strip()
    return "unknown"


def main():
    gauntlet, server, out_path = sys.argv[1:4]
    result = {"peer": peer_commit(server), "seed": 1, "type": "f32",
              "server_flags": "-c 256 -ngl 0 -ctk f32 -ctv f32 -fa off", "models": []}
    with tempfile.TemporaryDirectory(prefix="gt-qwen-oracle-") as tmp:
        for arch, preset in PRESETS:
            path = os.path.join(tmp, preset + ".gguf")
            subprocess.run([gauntlet, "synth", path, "--arch", arch, "--preset", preset],
                           check=True, capture_output=True)
            port = free_port()
            proc = subprocess.Popen([server, "-m", path, "--port", str(port), "-c", "256",
                                     "-ngl", "0", "-t", "1", "-ctk", "f32", "-ctv", "f32",
                                     "-fa", "off"], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            try:
                for _ in range(600):
                    try:
                        if post(port, "/tokenize", {"content": "a"}) is not None:
                            break
                    except OSError:
                        time.sleep(0.1)
                runs = []
                for prompt in PROMPTS:
                    res = post(port, "/completion", {
                        "prompt": prompt, "n_predict": N_GEN, "temperature": 0,
                        "n_probs": N_PROBS, "post_sampling_probs": False,
                        "cache_prompt": False})
                    steps = res["completion_probabilities"]
                    runs.append({"prompt": prompt, "greedy": [p["id"] for p in steps],
                                 "top": [[[t["id"], t["logprob"]] for t in p["top_logprobs"]]
                                         for p in steps]})
            finally:
                proc.terminate()
                proc.wait()
            result["models"].append({"arch": arch, "preset": preset, "runs": runs})
    with open(out_path, "w") as f:
        json.dump(result, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
