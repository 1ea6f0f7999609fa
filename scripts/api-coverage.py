#!/usr/bin/env python3
"""Lists the public API of ggml's headers that loom's headers do not declare.

usage: scripts/api-coverage.py GGML_INCLUDE_DIR [--strict]

Checks every header of GGML_INCLUDE_DIR that loom ships under the same name,
plus the headers of the parts every ggml build has (ggml-opt.h, gguf.h);
headers of backends loom does not build (CUDA, Metal, ...) are not checked.
What is compared: functions, typedef names (function pointer types included),
enum constants, GGML_/GGUF_ macros, and the members of every struct the
headers define. A name may live in another loom header than ggml's. Prints one
line per header and kind with what is missing, nothing when nothing is; with
--strict the exit status is 1 when something is missing.
scripts/fetch-ggml-reference.sh fetches the reference headers.
"""
import glob
import os
import re
import sys

ALWAYS = {"ggml.h", "ggml-alloc.h", "ggml-backend.h", "ggml-cpu.h", "ggml-cpp.h", "ggml-opt.h", "gguf.h"}

# Defined by ggml.h only for CUDA compilers (__CUDACC__).
CUDA_ONLY = {"ggml_unused_vars_impl"}


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def struct_members(body):
    members = set()
    for decl in body.split(";"):
        decl = re.sub(r"\[[^\]]*\]", "", decl).strip()
        if not decl:
            continue
        pointer = re.search(r"\(\s*\*\s*(\w+)\s*\)", decl)
        last = pointer or re.search(r"(\w+)\s*$", decl)
        if last:
            members.add(last.group(1))
    return members


def declared(path):
    text = strip_comments(open(path, encoding="utf-8").read())
    api = {}
    api["function"] = set(re.findall(r"\b(?:GGML_API|GGML_BACKEND_API)\b[^;{]*?\b((?:ggml|gguf)_[A-Za-z0-9_]+)\s*\(", text))
    api["typedef"] = set(re.findall(r"\(\s*\*\s*((?:ggml|gguf)_\w+)\s*\)", text)) | set(
        re.findall(r"typedef\s+[^;(]*?\b((?:ggml|gguf)_\w+)\s*;", text))
    api["macro"] = set(re.findall(r"#\s*define\s+((?:GGML|GGUF)_\w+)", text))
    api["enum constant"] = set()
    for body in re.findall(r"\benum\s+\w*\s*\{(.*?)\}", text, flags=re.S):
        api["enum constant"] |= set(re.findall(r"\b((?:GGML|GGUF)_\w+)\s*(?==|,|$)", body.strip() + ","))
    api["struct member"] = set()
    for name, body in re.findall(r"\bstruct\s+(\w+)\s*\{(.*?)\}\s*;", text, flags=re.S):
        api["struct member"] |= {f"{name}.{m}" for m in struct_members(body)}
    return api


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    ref_dir = sys.argv[1]
    strict = "--strict" in sys.argv[2:]
    ours_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "include")
    ours = {}
    for h in glob.glob(os.path.join(ours_dir, "*.h")):
        for kind, names in declared(h).items():
            ours.setdefault(kind, set()).update(names)
    shipped = {os.path.basename(h) for h in glob.glob(os.path.join(ours_dir, "*.h"))}
    missing_total = 0
    for h in sorted(glob.glob(os.path.join(ref_dir, "*.h"))):
        name = os.path.basename(h)
        if name not in shipped and name not in ALWAYS:
            continue
        for kind, names in declared(h).items():
            missing = sorted(names - ours.get(kind, set()) - CUDA_ONLY)
            if missing:
                missing_total += len(missing)
                print(f"{name}: {len(missing)} {kind}(s) missing: {' '.join(missing)}")
    return 1 if strict and missing_total else 0


if __name__ == "__main__":
    sys.exit(main())
