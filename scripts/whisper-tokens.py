#!/usr/bin/env python3
"""The tokens of a whisper-cli transcript, written as a reference or compared with one.

    scripts/whisper-tokens.py write JSON REFERENCE --again JSON2 --model FILE --generator "how"
    scripts/whisper-tokens.py compare JSON REFERENCE --model FILE [--p-tolerance 0.03]

JSON is what whisper-cli writes with --output-json-full (-ojf): segments
holding tokens with their id and probability p.

`write` keeps each segment's token ids, probabilities and text, the SHA-256
of the model file and the generator string. JSON2 is a second transcript of
the same model by the same library computed another way (another thread
count): where a greedy decoder meets two tokens of nearly equal score, the
rounding of the sums decides, and from there on the two transcripts may
part. Each segment records as `decided` how many of its first tokens both
transcripts share; only those are the model's and not the rounding's.

`compare` requires the same model, segments, and the decided tokens equal,
each of their probabilities within the tolerance of the reference's (a
model of random weights magnifies rounding: ggml's own transcripts of the
synthetic model with 1 and 2 threads differ by up to 0.012); the tokens
after those are counted, not required. It prints the first difference
and exits 1 when they disagree, 0 when they agree.
"""

import hashlib

import argparse
import json
import sys


def segments_of(path):
    # whisper-cli writes the JSON as bytes of its tokens; a token that is
    # part of a multi-byte character may leave invalid UTF-8.
    doc = json.loads(open(path, "rb").read().decode("utf-8", errors="replace"))
    out = []
    for seg in doc.get("transcription", []):
        toks = seg.get("tokens", [])
        out.append({"text": seg.get("text", ""), "ids": [t["id"] for t in toks], "p": [t["p"] for t in toks]})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["write", "compare"])
    ap.add_argument("json")
    ap.add_argument("reference")
    ap.add_argument("--generator", default="")
    ap.add_argument("--again", help="write: a second transcript of the same model")
    ap.add_argument("--model", required=True, help="the model file the transcripts are of")
    ap.add_argument("--p-tolerance", type=float, default=0.03)
    a = ap.parse_args()

    got = segments_of(a.json)
    model = hashlib.sha256(open(a.model, "rb").read()).hexdigest()
    if a.mode == "write":
        if not got or not any(s["ids"] for s in got):
            sys.exit(f"{a.json}: no tokens")
        if not a.again:
            sys.exit("write needs --again")
        again = segments_of(a.again)
        for i, s in enumerate(got):
            other = again[i]["ids"] if i < len(again) else []
            s["decided"] = next((k for k, (x, y) in enumerate(zip(s["ids"], other)) if x != y),
                                min(len(s["ids"]), len(other)))
        json.dump({"generator": a.generator, "model_sha256": model, "segments": got}, open(a.reference, "w"),
                  indent=1)
        return 0

    ref = json.load(open(a.reference))
    if ref["model_sha256"] != model:
        print(f"{a.model} is not the model of the reference (sha256 {model}, want {ref['model_sha256']})")
        return 1
    want = ref["segments"]
    if len(got) != len(want):
        print(f"{len(got)} segments, the reference has {len(want)}")
        return 1
    worst = 0.0
    n = 0
    extra = 0
    for i, (g, w) in enumerate(zip(got, want)):
        d = w["decided"]
        if g["ids"] != w["ids"] and len(g["ids"]) > d:
            extra += 1
        g = {"ids": g["ids"][:d], "p": g["p"][:d], "text": g["text"]}
        w = {"ids": w["ids"][:d], "p": w["p"][:d], "text": w["text"]}
        if g["ids"] != w["ids"]:
            k = next((k for k, (x, y) in enumerate(zip(g["ids"], w["ids"])) if x != y), min(len(g["ids"]), len(w["ids"])))
            print(f"segment {i}: tokens differ from position {k} of {len(w['ids'])}")
            print(f"  want: {w['ids'][k:k + 8]} {w['text']!r}")
            print(f"  got:  {g['ids'][k:k + 8]} {g['text']!r}")
            return 1
        for k, (x, y) in enumerate(zip(g["p"], w["p"])):
            worst = max(worst, abs(x - y))
            if abs(x - y) > a.p_tolerance:
                print(f"segment {i}, token {k} ({w['ids'][k]}): p {x:.6f}, the reference's {y:.6f}")
                return 1
        n += len(w["ids"])
    print(f"{len(want)} segments, {n} decided tokens equal to the reference; largest difference of p {worst:.2e}"
          + (f"; {extra} segments part from it after their decided tokens" if extra else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
