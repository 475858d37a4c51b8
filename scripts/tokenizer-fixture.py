#!/usr/bin/env python3
"""Regenerates pkg/embed/wordpiece/testdata/chunks.json: chunks of this
repository's own source with the ids the reference Hugging Face
`tokenizers` library gives them, so the Go WordPiece tokenizer can be
checked token-for-token.

    pip install tokenizers
    python3 scripts/tokenizer-fixture.py .cache/models/bge-small-en-v1.5-q/tokenizer.json
"""
import json
import subprocess
import sys

from tokenizers import Tokenizer

MAX_LEN = 512
WANT = 320

def chunks():
    files = subprocess.run(
        ["git", "ls-files", "*.go", "*.md", "*.sh", "*.py", "*.yaml", "Makefile"],
        check=True, capture_output=True, text=True).stdout.split()
    files = [f for f in sorted(files) if "testdata" not in f]
    out = []
    for f in files:
        with open(f, encoding="utf-8") as fh:
            lines = fh.read().split("\n")
        # windows of varied size, like the chunker's (6 to 40 lines)
        i, n = 0, 0
        while i < len(lines):
            size = 6 + (n * 13 + len(f)) % 35
            text = "\n".join(lines[i:i + size]).strip()
            if text:
                out.append(text)
            i += size
            n += 1
    step = max(1, len(out) // WANT)
    return out[::step][:WANT]

# Hand-written edge cases: accents, CJK, control and format characters,
# odd whitespace, long words, punctuation runs.
EDGES = [
    "", "   ", "x", "Naïve café RÉSUMÉ Ångström façade", "日本語のテキストと中文字符",
    "tab\there\r\nnl\u000bvt\u000cff\u0085nel\u00a0nbsp\u2003em\u3000ideo",
    "zero\u200bwidth\u200djoiner\ufeffbom\u0000nul\u0007bell",
    "a" * 150, "x" * 99 + " " + "y" * 100 + " " + "z" * 101,
    "snake_case_identifier camelCaseIdentifier HTTPServer utf8Decode",
    "!!!???...---===>>><<<|||&&&***%%%$$$###@@@^^^~~~```'''\"\"\"",
    "emoji 🎉 and 👩‍💻 and ½ ² ™ © µ ß ﬁ İstanbul ΣΑΣ",
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３ and ｶﾀｶﾅ",
    "func (s *Server) handle(w http.ResponseWriter, r *http.Request) { s.mu.Lock() }",
]

def main():
    tok = Tokenizer.from_file(sys.argv[1])
    tok.no_padding()
    tok.enable_truncation(MAX_LEN)
    texts = EDGES + chunks()
    enc = tok.encode_batch(texts)
    cases = [{"text": t, "ids": e.ids} for t, e in zip(texts, enc)]
    out = "pkg/embed/wordpiece/testdata/chunks.json"
    with open(out, "w", encoding="utf-8") as fh:
        fh.write('{"max_len": %d, "cases": [\n' % MAX_LEN)
        fh.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
        fh.write("\n]}\n")
    print(f"{out}: {len(cases)} cases, {sum(len(c['ids']) for c in cases)} ids")

if __name__ == "__main__":
    main()
