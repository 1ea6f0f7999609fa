#!/usr/bin/env python3
"""Cuts the block loop of a quantized product out of GNU assembly for llvm-mca.

    arm_mca_loop.py FILE.s FUNCTIONS BLOCK_VALUES [--pick min|max]

FUNCTIONS: a regular expression searched in the demangled names of FILE.s's
functions (a kernel's instantiations for each column count may be functions
of their own). The loops of a function are the spans from a label to the
last branch back to it; of the innermost ones (no label of another loop
inside) that multiply bytes, over all those functions, the one with the
fewest byte products per iteration (min: the one-column loop of a kernel
that also has wider ones; the first of equals) or the most (max: the main
loop before a scalar tail) is taken. Byte products: 16 per SDOT (.16b) and
8 per SMULL/SMLAL(2) with an 8h destination.

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


def products(body):
    return sum(16 for l in body if SDOT.match(l)) + sum(8 for l in body if SMUL.match(l))


def main():
    path, func, block_values = sys.argv[1], sys.argv[2], int(sys.argv[3])
    pick = sys.argv[5] if len(sys.argv) > 5 and sys.argv[4] == "--pick" else "min"
    cands = []
    for fn in functions(open(path).read().splitlines(), func):
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
