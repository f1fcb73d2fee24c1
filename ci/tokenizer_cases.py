"""ci/tokenizer_cases.py: the strings the tokenizer vectors cover, and the
writer of one vector file from llama.cpp's ids.

Every string is tokenized twice, with parse_special false (prompt text) and
true (template markup), no BOS. They cover code, CJK, emoji, digits,
whitespace runs, contractions and text that looks like special tokens of
each family (Llama 3, ChatML, Phi-3, Gemma, FIM, pads).

    python3 ci/tokenizer_cases.py list           # the strings, one JSON string a line
    python3 ci/tokenizer_cases.py write OUT VOCAB_NAME SHA256 COMMIT SOURCE IDS_DIR
        IDS_DIR/N.F.json and IDS_DIR/N.T.json hold string N's ids without and
        with parse_special.
"""
import json
import os
import sys

CASES = [
    "Hello, world!",
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < 10; i++) { x[i] = i * 2; }\n\treturn 0;",
    "1234567890 12 123 1234 3.14159 -42 1e-9 0x1F",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3068\u4e2d\u6587\u6587\u672c\uff0c\u8fd8\u6709\ud55c\uad6d\uc5b4.",
    "emoji: \U0001f999\U0001f525\U0001f44d\U0001f3fd flags \U0001f1eb\U0001f1f7 ZWJ \U0001f468\u200d\U0001f469\u200d\U0001f467",
    "   leading spaces, trailing   ",
    "tabs\tand\t\ttabs\nnew\n\n\nlines\r\nCRLF",
    "  \n  \n",
    "I'm sure you'll say I'D WE'VE THEY'RE it's o'clock",
    "</s> <s> <unk> <|endoftext|> <eos> <bos>",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "<|user|>\nhi<|end|>\n<|assistant|>\n",
    "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n",
    "<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>",
    "\u00dcn\u00efc\u00f6d\u00e9 \u00e0ccents, \u00df, \u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac, \u0440\u0443\u0441\u0441\u043a\u0438\u0439, \u0627\u0644\u0639\u0631\u0628\u064a\u0629, \u0939\u093f\u0928\u094d\u0926\u0940",
    "mixed123abc456def 7890x",
    "$$$ !!! ??? ... --- ***\n\n",
    "a\u00a0b\u2009c\u3000d",
    "xxxxx          y",
    "https://example.com/path?q=1&r=two#frag",
    "\"quoted\" 'single' `back`",
    "\u2581 literal U+2581 and [PAD151646] [PAD32011]",
    "Hello<|end|>world </s>end",
    "a                    \n\t\t\t\t\tb",
    "<|user|>   spaced <|end|>   \n\n",
]


def write_doc(out, doc, cases):
    # One case a line, so a diff shows which string changed.
    head = json.dumps({k: v for k, v in doc.items() if k != "cases"}, ensure_ascii=False, indent=1)
    lines = [json.dumps(c, ensure_ascii=False) for c in cases]
    with open(out, "w") as f:
        f.write(head[:-2] + ',\n "cases": [\n' + ",\n".join(lines) + "\n ]\n}\n")


def main():
    if sys.argv[1] == "reformat":  # rewrite a vector file in this layout
        doc = json.load(open(sys.argv[2]))
        write_doc(sys.argv[2], doc, doc["cases"])
        return
    if sys.argv[1] == "list":
        for s in CASES:
            print(json.dumps(s))
        return
    out, name, sha, commit, source, ids_dir = sys.argv[2:8]
    cases = []
    for i, s in enumerate(CASES):
        for special in (False, True):
            with open(os.path.join(ids_dir, "%d.%s.json" % (i, "T" if special else "F"))) as f:
                ids = json.load(f)
            cases.append({"text": s, "parse_special": special, "ids": ids})
    doc = {
        "description": "llama.cpp's ids for these strings (no BOS), with parse_special "
                       "false and true; gauntlet's tokenizer must give the same",
        "vocab": name,
        "vocab_sha256": sha,
        "peer_commit": commit,
        "peer_source": source,
        "command": "ci/tokenizer-vectors.sh (gt-peer-oracle tokenize [--special])",
        "cases": cases,
    }
    write_doc(out, doc, cases)


main()
