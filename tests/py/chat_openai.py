"""Drives `gauntlet serve` with the real openai client: chat.completions,
plain and streamed. The prompt the server renders is checked against the
GGUF's own chat template rendered by jinja2 (token count), and a model with
no template gets a 400 that says so. Exit 77 (skip) without openai/jinja2/gguf."""
import json, os, re, subprocess, sys
if os.environ.get("GT_PYORACLE"):
    sys.path.insert(0, os.environ["GT_PYORACLE"])
try:
    import openai, jinja2, gguf
except ImportError as e:
    print(f"SKIP: {e} (ci/test.sh installs openai, jinja2 and gguf into GT_PYORACLE)")
    sys.exit(77)

gauntlet, smol, gemma = sys.argv[1], os.environ.get("GT_SMOLLM2"), os.environ.get("GT_GEMMA3")
if not smol:
    print("SKIP: GT_SMOLLM2 is not set (ci/test.sh fetches SmolLM2)")
    sys.exit(77)

def start(model, *extra):
    p = subprocess.Popen([gauntlet, "serve", "-m", model, "-b", "cpu", "--port", "0", "-q", *extra],
                         stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        m = re.match(r"listening on http://127.0.0.1:(\d+)", line)
        if m:
            return p, openai.OpenAI(base_url=f"http://127.0.0.1:{m.group(1)}/v1", api_key="x", timeout=60)
    raise SystemExit("server did not start")

msgs = [{"role": "user", "content": "What is the capital of France?"}]
p, cl = start(smol)
try:
    r = cl.chat.completions.create(model=cl.models.list().data[0].id, messages=msgs, max_tokens=40, temperature=0)
    text = r.choices[0].message.content
    assert r.choices[0].message.role == "assistant", r
    assert "Paris" in text, text
    assert r.choices[0].finish_reason == "stop", r
    chunks = list(cl.chat.completions.create(model=cl.models.list().data[0].id, messages=msgs, max_tokens=40,
                                             temperature=0, stream=True))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == text, (streamed, text)
    # The template, rendered by jinja2, split on its control tokens.
    rd = gguf.GGUFReader(smol)
    f = rd.fields["tokenizer.chat_template"]
    tmpl = bytes(f.parts[f.data[0]]).decode()
    rendered = jinja2.Template(tmpl).render(messages=msgs, add_generation_prompt=True)
    n = 0
    for seg in re.split(r"(<\|im_start\|>|<\|im_end\|>)", rendered):
        if seg in ("<|im_start|>", "<|im_end|>"):
            n += 1
        elif seg:
            out = subprocess.run([gauntlet, "tokenize", "-m", smol, "--no-bos", "--json", seg],
                                 capture_output=True, text=True, check=True).stdout
            n += len(json.loads(out)["tokens"])
    assert r.usage.prompt_tokens == n, (r.usage.prompt_tokens, n)
    print(f"PASS chatml: {text!r}, {n} prompt tokens as jinja2 renders the template, stream equal")
    try:
        cl.chat.completions.create(model="no-such-model", messages=msgs, max_tokens=4)
        raise SystemExit("FAIL: a chat request for an unknown model was answered")
    except openai.NotFoundError as e:
        print("PASS unknown model: 404:", e.message)
finally:
    p.terminate(); p.wait(10)

if gemma:
    p, cl = start(gemma)
    try:
        cl.chat.completions.create(model=cl.models.list().data[0].id, messages=msgs, max_tokens=4)
        raise SystemExit("FAIL: a model with no chat template answered a chat request")
    except openai.BadRequestError as e:
        assert "chat_template" in str(e), e
        print("PASS gemma base: 400:", e.message)
    finally:
        p.terminate(); p.wait(10)
