#!/usr/bin/env python3
"""Lists the public functions of ggml's headers that loom's headers do not declare.

usage: scripts/api-coverage.py GGML_INCLUDE_DIR [--strict]

Checks every header of GGML_INCLUDE_DIR that loom ships under the same name,
plus the headers of the parts every ggml build has (ggml-opt.h, gguf.h);
headers of backends loom does not build (CUDA, Metal, ...) are not checked.
Prints one line per header with what is missing, nothing when nothing is;
with --strict the exit status is 1 when something is missing.
scripts/fetch-ggml-reference.sh fetches the reference headers.
"""
import glob
import os
import re
import sys

ALWAYS = {"ggml.h", "ggml-alloc.h", "ggml-backend.h", "ggml-cpu.h", "ggml-cpp.h", "ggml-opt.h", "gguf.h"}


def declared(path):
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    pattern = r"\b(?:GGML_API|GGML_BACKEND_API)\b[^;{]*?\b((?:ggml|gguf)_[A-Za-z0-9_]+)\s*\("
    return {m.group(1) for m in re.finditer(pattern, text)}


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    ref_dir = sys.argv[1]
    strict = "--strict" in sys.argv[2:]
    ours_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "include")
    ours = set()
    for h in glob.glob(os.path.join(ours_dir, "*.h")):
        ours |= declared(h)
    shipped = {os.path.basename(h) for h in glob.glob(os.path.join(ours_dir, "*.h"))}
    missing_total = 0
    for h in sorted(glob.glob(os.path.join(ref_dir, "*.h"))):
        name = os.path.basename(h)
        if name not in shipped and name not in ALWAYS:
            continue
        missing = sorted(declared(h) - ours)
        if missing:
            missing_total += len(missing)
            print(f"{name}: {len(missing)} missing: {' '.join(missing)}")
    return 1 if strict and missing_total else 0


if __name__ == "__main__":
    sys.exit(main())
