#!/usr/bin/env python3
"""Cuts the block loop of a quantized product out of GNU assembly for llvm-mca.

    arm_mca_loop.py FILE.s FUNCTIONS BLOCK_VALUES [--pick min|max]

    arm_mca_loop.py FILE.s FUNCTIONS BLOCK_VALUES [--pick min|max] --nest N1[,N2...]

FUNCTIONS: a regular expression searched in the demangled names of FILE.s's
functions (a kernel's instantiations for each column count may be functions
of their own). The loops of a function are the spans from a label to the
last branch back to it; of the innermost ones (no label of another loop
inside) that multiply bytes, over all those functions, the one with the
fewest byte products per iteration (min: the one-column loop of a kernel
that also has wider ones; the first of equals) or the most (max: the main
loop before a scalar tail) is taken. Byte products: 16 per SDOT (.16b) and
8 per SMULL/SMLAL(2) with an 8h destination.

With --nest, the loop taken is one with loops inside it, nested as deep
as the list is long, and its body is written out with each inner loop
repeated N1 times (their own inner loops N2 times, ...), as a block of
ggml's repacked products runs its groups of scales and values: those trip
counts are the caller's to give (the source's), not found here.

Prints the loop's instructions (label and directives left out, the branch
kept) on stdout, and on stderr one line: "blocks=N products=P" with N the
blocks of BLOCK_VALUES values one iteration covers.
"""

import re
import subprocess
import sys

BRANCH = re.compile(r"^\s*(b|b\.\w+|b(?:eq|ne|gt|ge|lt|le|hi|hs|lo|ls|mi|pl|cs|cc)|cbn?z|tbn?z)\s+.*?(\.L\w+)\s*$")
SDOT = re.compile(r"^\s*sdot\s+v\d+\.4s,\s*v\d+\.16b")
SMUL = re.compile(r"^\s*s(?:mull|mlal)2?\s+v\d+\.8h")


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def functions(lines, pattern):
    """The lines of every function whose demangled name matches pattern."""
    starts = [(i, m.group(1)) for i, l in enumerate(lines) if (m := re.match(r"^([A-Za-z_.$][\w.$]*):\s*$", l))]
    symbols = [s for _, s in starts if not s.startswith(".L")]
    pretty = dict(zip(symbols, demangle(symbols)))
    out = []
    for i, name in starts:
        if name.startswith(".L") or not re.search(pattern, pretty[name]):
            continue
        end = next((j for j in range(i + 1, len(lines)) if re.match(r"^\s*\.size\s+" + re.escape(name), lines[j])),
                   len(lines))
        out.append(lines[i:end])
    if not out:
        sys.exit(f"arm_mca_loop: no function matches {pattern!r}")
    return out


def inner_loops(fn):
    labels = {m.group(1): i for i, l in enumerate(fn) if (m := re.match(r"^(\.L\w+):", l))}
    widest = {}  # label line -> its last branch back
    for i, l in enumerate(fn):
        m = BRANCH.match(l)
        if m and m.group(2) in labels and labels[m.group(2)] < i:
            a = labels[m.group(2)]
            widest[a] = max(i, widest.get(a, i))
    spans = sorted(widest.items())
    return [(a, b) for a, b in spans if not any(a < c <= b for c, _ in spans if c != a)]


def all_loops(fn):
    """Every loop of fn as (label line, last branch back to it), in order."""
    labels = {m.group(1): i for i, l in enumerate(fn) if (m := re.match(r"^(\.L\w+):", l))}
    widest = {}
    for i, l in enumerate(fn):
        m = BRANCH.match(l)
        if m and m.group(2) in labels and labels[m.group(2)] < i:
            a = labels[m.group(2)]
            widest[a] = max(i, widest.get(a, i))
    return sorted(widest.items())


def children(span, spans):
    a, b = span
    inside = [s for s in spans if a < s[0] and s[1] < b]
    return [s for s in inside if not any(t != s and t[0] < s[0] and s[1] < t[1] for t in inside)]


def depth(span, spans):
    return 1 + max((depth(c, spans) for c in children(span, spans)), default=0)


def expand(fn, span, spans, trips):
    """The lines of a loop's body with each inner loop repeated trips[0]
    times (theirs trips[1] ...), the inner loops' branches back left out."""
    a, b = span
    out, i = [], a + 1
    for c in children(span, spans):
        out += fn[i:c[0]]
        out += expand(fn, c, spans, trips[1:])[:-1] * trips[0]
        i = c[1] + 1
    return out + fn[i:b + 1]


def products(body):
    return sum(16 for l in body if SDOT.match(l)) + sum(8 for l in body if SMUL.match(l))


def main():
    path, func, block_values = sys.argv[1], sys.argv[2], int(sys.argv[3])
    opts = dict(zip(sys.argv[4::2], sys.argv[5::2]))
    pick = opts.get("--pick", "min")
    trips = [int(t) for t in opts["--nest"].split(",")] if "--nest" in opts else []
    cands = []
    for fn in functions(open(path).read().splitlines(), func):
        if trips:
            spans = all_loops(fn)
            for sp in spans:
                if depth(sp, spans) == len(trips) + 1:
                    body = expand(fn, sp, spans, trips)
                    if products(body) > 0:
                        cands.append((products(body), body))
            continue
        for a, b in inner_loops(fn):
            p = products(fn[a:b + 1])
            if p > 0:
                cands.append((p, fn[a + 1:b + 1]))
    if not cands:
        sys.exit(f"arm_mca_loop: no loop of byte products in {func!r}")
    p, loop = (min if pick == "min" else max)(cands, key=lambda c: c[0])
    body = [l for l in loop if l.strip() and not re.match(r"^\s*\.", l) and not re.match(r"^\.L\w+:", l)]
    print("\n".join(body))
    print(f"blocks={p / block_values:g} products={p}", file=sys.stderr)


if __name__ == "__main__":
    main()
