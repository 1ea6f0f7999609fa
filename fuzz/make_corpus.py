#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_gguf: small valid GGUF files of versions 1-3
covering every value type, every tensor type loom reads, alignments and empty
things, plus deterministic broken variants of them (one defect each).

The encoder here is independent of loom's writer, so that seeds also check
the reader against a second implementation of the format.

Usage: make_corpus.py OUTPUT_DIR
"""

import os
import random
import struct
import sys

# gguf_type values
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
FMT = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "?", U64: "Q", I64: "q", F64: "d"}

# ggml types loom reads: value -> (block size, bytes per block)
GGML = {"f32": (0, 1, 4), "f16": (1, 1, 2), "q4_0": (2, 32, 18), "q8_0": (8, 32, 34), "i8": (24, 1, 1),
        "i16": (25, 1, 2), "i32": (26, 1, 4), "i64": (27, 1, 8), "bf16": (30, 1, 2)}


class Gguf:
    def __init__(self, version=3, alignment=32):
        self.version = version
        self.alignment = alignment
        self.kv = []       # (key, type, value, elem_type)
        self.tensors = []  # (name, ne, type name)

    def add(self, key, typ, value, elem=None):
        self.kv.append((key, typ, value, elem))
        return self

    def tensor(self, name, ne, typ="f32"):
        self.tensors.append((name, ne, typ))
        return self

    def _len(self, n):
        return struct.pack("<I" if self.version == 1 else "<Q", n)

    def _str(self, s):
        b = s.encode() if isinstance(s, str) else s
        return self._len(len(b)) + b

    def _val(self, typ, v):
        return self._str(v) if typ == STR else struct.pack("<" + FMT[typ], v)

    def nbytes(self, ne, typ):
        _, blck, size = GGML[typ]
        n = 1
        for d in ne:
            n *= d
        return n // blck * size

    def encode(self, overrides=None):
        o = overrides or {}
        out = bytearray(o.get("magic", b"GGUF"))
        out += struct.pack("<I", o.get("version", self.version))
        out += self._len(o.get("n_tensors", len(self.tensors)))
        out += self._len(o.get("n_kv", len(self.kv)))
        for key, typ, value, elem in self.kv:
            out += self._str(key) + struct.pack("<i", typ)
            if typ == ARR:
                out += struct.pack("<i", elem) + self._len(len(value))
                for v in value:
                    out += self._val(elem, v)
            else:
                out += self._val(typ, value)
        offset = 0
        for i, (name, ne, typ) in enumerate(self.tensors):
            tid = o.get("type", {}).get(i, GGML[typ][0])
            dims = o.get("dims", {}).get(i, ne)
            out += self._str(name) + struct.pack("<I", len(dims))
            for d in dims:
                out += self._len(d)
            out += struct.pack("<i", tid) + struct.pack("<Q", o.get("offset", {}).get(i, offset))
            offset += -(-self.nbytes(ne, typ) // self.alignment) * self.alignment
        if self.tensors:
            out += bytes(-len(out) % self.alignment)
        rng = random.Random(len(out))
        for name, ne, typ in self.tensors:
            n = self.nbytes(ne, typ)
            out += bytes(rng.randrange(256) for _ in range(n)) + bytes(-n % self.alignment)
        return bytes(out)


def all_value_types(version):
    g = Gguf(version)
    g.add("general.architecture", STR, "llama").add("general.name", STR, "seed")
    g.add("u8", U8, 200).add("i8", I8, -3).add("u16", U16, 65000).add("i16", I16, -2)
    g.add("u32", U32, 4000000000).add("i32", I32, -7).add("f32", F32, 0.5).add("bool", BOOL, True)
    if version > 1:
        g.add("u64", U64, 2**63).add("i64", I64, -2**40).add("f64", F64, 1.25)
    g.add("a.u8", ARR, [1, 2, 3], U8).add("a.i32", ARR, [-1, 5], I32).add("a.f32", ARR, [0.0, -1.5], F32)
    g.add("a.bool", ARR, [True, False], BOOL).add("a.str", ARR, ["<s>", "", "\u2581hi"], STR)
    g.add("a.empty", ARR, [], U32)
    return g


def tensors(version, alignment=32):
    g = Gguf(version, alignment)
    if alignment != 32:
        g.add("general.alignment", U32, alignment)
    g.add("general.architecture", STR, "llama")
    g.tensor("w.f32", [4, 2]).tensor("w.f16", [8], "f16").tensor("w.bf16", [4], "bf16")
    g.tensor("w.q4_0", [32, 2], "q4_0").tensor("w.q8_0", [32], "q8_0").tensor("w.i8", [3], "i8")
    g.tensor("w.i16", [2, 2], "i16").tensor("w.i32", [1, 1, 1, 2], "i32").tensor("w.i64", [1], "i64")
    g.tensor("w.empty", [0, 3])
    return g


def tiny_llama(version):
    g = Gguf(version)
    g.add("general.architecture", STR, "llama").add("llama.embedding_length", U32, 8)
    g.add("llama.block_count", U32, 1).add("llama.attention.head_count", U32, 2)
    g.add("llama.attention.layer_norm_rms_epsilon", F32, 1e-5)
    g.add("tokenizer.ggml.model", STR, "llama")
    g.add("tokenizer.ggml.tokens", ARR, ["<unk>", "<s>", "</s>", "\u2581", "a", "\u2581a"], STR)
    g.add("tokenizer.ggml.scores", ARR, [0.0, 0.0, 0.0, -1.0, -2.0, -0.5], F32)
    g.add("tokenizer.ggml.token_type", ARR, [2, 3, 3, 1, 1, 1], I32)
    g.add("tokenizer.ggml.bos_token_id", U32, 1)
    g.tensor("token_embd.weight", [8, 6]).tensor("output_norm.weight", [8])
    g.tensor("blk.0.attn_q.weight", [8, 8], "f16")
    return g


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    seeds = {}
    for v in (1, 2, 3):
        seeds[f"v{v}_values"] = all_value_types(v)
        seeds[f"v{v}_tensors"] = tensors(v)
        seeds[f"v{v}_llama"] = tiny_llama(v)
    seeds["v3_align64"] = tensors(3, 64)
    seeds["v3_align1"] = tensors(3, 1)
    seeds["v3_empty"] = Gguf(3)
    seeds["v3_vocab_only"] = Gguf(3).add("tokenizer.ggml.model", STR, "llama").add(
        "tokenizer.ggml.tokens", ARR, ["<unk>", "<s>"], STR)

    files = {}
    for name, g in seeds.items():
        files[name] = g.encode()
    # One defect each, on the tensor-bearing seeds.
    for v in (1, 3):
        g = tensors(v)
        files[f"bad_v{v}_magic"] = g.encode({"magic": b"GGUG"})
        files[f"bad_v{v}_version"] = g.encode({"version": 7})
        files[f"bad_v{v}_n_tensors"] = g.encode({"n_tensors": 0xFFFFFFFF})
        files[f"bad_v{v}_n_kv"] = g.encode({"n_kv": 2})
        files[f"bad_v{v}_type_q4_k"] = g.encode({"type": {0: 12}})
        files[f"bad_v{v}_type_invalid"] = g.encode({"type": {1: 99}})
        files[f"bad_v{v}_dims5"] = g.encode({"dims": {0: [1, 1, 1, 1, 1]}})
        files[f"bad_v{v}_dims_huge"] = g.encode({"dims": {2: [0xFFFFFFFF, 0xFFFFFFFF]}})
        files[f"bad_v{v}_offset_misaligned"] = g.encode({"offset": {1: 36}})
        files[f"bad_v{v}_offset_oob"] = g.encode({"offset": {9: 1 << 40}})
        files[f"bad_v{v}_block"] = g.encode({"dims": {3: [33, 2]}})
        full = g.encode()
        files[f"bad_v{v}_truncated_meta"] = full[: len(full) // 3]
        files[f"bad_v{v}_truncated_data"] = full[:-40]
    g = tensors(3)
    g.add("general.architecture", STR, "again")
    files["bad_v3_duplicate_key"] = g.encode()
    g = tensors(3)
    g.tensor("w.f32", [4])
    files["bad_v3_duplicate_tensor"] = g.encode()
    files["bad_v3_align0"] = tensors(3, 32).add("general.alignment", U32, 0).encode()
    files["bad_v3_align48"] = Gguf(3, 32).add("general.alignment", U32, 48).encode()
    rng = random.Random(1234)
    base = all_value_types(3).encode()
    for i in range(6):
        b = bytearray(base)
        for _ in range(3):
            b[rng.randrange(len(b))] = rng.randrange(256)
        files[f"bad_v3_flipped_{i}"] = bytes(b)

    for name, data in sorted(files.items()):
        with open(os.path.join(out, name + ".gguf"), "wb") as f:
            f.write(data)
    print(f"wrote {len(files)} files, {sum(map(len, files.values()))} bytes, to {out}")


if __name__ == "__main__":
    main()
