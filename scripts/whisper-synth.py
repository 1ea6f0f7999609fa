#!/usr/bin/env python3
"""Writes a whisper.cpp model (its ggml file format) with random weights.

    scripts/whisper-synth.py TEMPLATE OUT [--state N] [--heads N] [--layers N] [--seed N]

TEMPLATE is one of the models whisper.cpp's repository ships for its tests
(models/for-tests-ggml-tiny.en.bin): those hold the hyperparameters, the mel
filters and the vocabulary but no weights, so whisper.cpp computes on memory
nobody wrote. OUT takes the template's filters and vocabulary, the given
width, head count and layer count (encoder and decoder alike; 4 layers make
whisper.cpp call it "tiny"), and every tensor whisper.cpp's loader expects,
filled from Python's Mersenne Twister seeded with --seed (random.random() is
the same on every Python 3), so the same command writes the same bytes
everywhere. Matrices and the convolutions are F16 (ftype 1, as the released
models), the rest F32.

The values are scaled so that the activations stay near unit size through
every layer (weights uniform in +-sqrt(3 / fan_in), layer norms near 1,
small biases): the decoder then picks tokens by clear margins rather than by
rounding noise.
"""

import argparse
import math
import random
import struct
import sys

GGML_TYPE_F32 = 0
GGML_TYPE_F16 = 1


def read_template(path):
    """The template's hyperparameters (11 int32), mel filters and vocabulary, as bytes."""
    data = open(path, "rb").read()
    if len(data) < 56 or struct.unpack_from("<I", data, 0)[0] != 0x67676D6C:
        sys.exit(f"{path}: not a whisper.cpp ggml model")
    hparams = list(struct.unpack_from("<11i", data, 4))
    n_mel, n_fft = struct.unpack_from("<2i", data, 48)
    pos = 56 + 4 * n_mel * n_fft
    (n_words,) = struct.unpack_from("<i", data, pos)
    pos += 4
    for _ in range(n_words):
        (length,) = struct.unpack_from("<I", data, pos)
        pos += 4 + length
    if pos > len(data):
        sys.exit(f"{path}: truncated vocabulary")
    return hparams, data[48:pos]


def tensor_list(n_vocab, n_audio_ctx, n_text_ctx, n_mels, state, layers):
    """(name, ne, type, kind) of every tensor whisper.cpp's loader creates."""
    s = state
    out = [
        ("encoder.positional_embedding", [s, n_audio_ctx], GGML_TYPE_F32, "embed"),
        ("encoder.conv1.weight", [3, n_mels, s], GGML_TYPE_F16, ("matrix", 3 * n_mels)),
        ("encoder.conv1.bias", [1, s], GGML_TYPE_F32, "bias"),
        ("encoder.conv2.weight", [3, s, s], GGML_TYPE_F16, ("matrix", 3 * s)),
        ("encoder.conv2.bias", [1, s], GGML_TYPE_F32, "bias"),
        ("encoder.ln_post.weight", [s], GGML_TYPE_F32, "norm"),
        ("encoder.ln_post.bias", [s], GGML_TYPE_F32, "bias"),
        ("decoder.positional_embedding", [s, n_text_ctx], GGML_TYPE_F32, "embed"),
        ("decoder.token_embedding.weight", [s, n_vocab], GGML_TYPE_F16, "tokens"),
        ("decoder.ln.weight", [s], GGML_TYPE_F32, "norm"),
        ("decoder.ln.bias", [s], GGML_TYPE_F32, "bias"),
    ]

    def block(prefix, attns):
        t = [
            (f"{prefix}.mlp_ln.weight", [s], GGML_TYPE_F32, "norm"),
            (f"{prefix}.mlp_ln.bias", [s], GGML_TYPE_F32, "bias"),
            (f"{prefix}.mlp.0.weight", [s, 4 * s], GGML_TYPE_F16, ("matrix", s)),
            (f"{prefix}.mlp.0.bias", [4 * s], GGML_TYPE_F32, "bias"),
            (f"{prefix}.mlp.2.weight", [4 * s, s], GGML_TYPE_F16, ("matrix", 4 * s)),
            (f"{prefix}.mlp.2.bias", [s], GGML_TYPE_F32, "bias"),
        ]
        for a in attns:
            t += [
                (f"{prefix}.{a}_ln.weight", [s], GGML_TYPE_F32, "norm"),
                (f"{prefix}.{a}_ln.bias", [s], GGML_TYPE_F32, "bias"),
                (f"{prefix}.{a}.query.weight", [s, s], GGML_TYPE_F16, ("matrix", s)),
                (f"{prefix}.{a}.query.bias", [s], GGML_TYPE_F32, "bias"),
                (f"{prefix}.{a}.key.weight", [s, s], GGML_TYPE_F16, ("matrix", s)),
                (f"{prefix}.{a}.value.weight", [s, s], GGML_TYPE_F16, ("matrix", s)),
                (f"{prefix}.{a}.value.bias", [s], GGML_TYPE_F32, "bias"),
                (f"{prefix}.{a}.out.weight", [s, s], GGML_TYPE_F16, ("matrix", s)),
                (f"{prefix}.{a}.out.bias", [s], GGML_TYPE_F32, "bias"),
            ]
        return t

    for i in range(layers):
        out += block(f"encoder.blocks.{i}", ["attn"])
    for i in range(layers):
        out += block(f"decoder.blocks.{i}", ["attn", "cross_attn"])
    return out


def values(rng, count, kind):
    u = rng.random
    if kind == "norm":
        return [1.0 + 0.2 * (u() - 0.5) for _ in range(count)]
    if kind == "bias":
        return [0.1 * (u() - 0.5) for _ in range(count)]
    if kind == "embed":
        return [2.0 * (u() - 0.5) for _ in range(count)]
    if kind == "tokens":
        # Half the width of the other embeddings: the logits (the final
        # hidden state times these rows) then give the chosen tokens
        # probabilities of about 0.1-0.7 instead of 1.0 or 0.001.
        return [u() - 0.5 for _ in range(count)]
    a = math.sqrt(3.0 / kind[1])
    return [a * (2.0 * u() - 1.0) for _ in range(count)]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("template")
    p.add_argument("out")
    p.add_argument("--state", type=int, default=128)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if args.state <= 0 or args.heads <= 0 or args.state % args.heads or args.layers <= 0:
        sys.exit("--state must be a positive multiple of --heads, --layers positive")

    hparams, filters_and_vocab = read_template(args.template)
    n_vocab, n_audio_ctx, _, _, _, n_text_ctx, _, _, _, n_mels, _ = hparams
    hparams[2] = hparams[6] = args.state
    hparams[3] = hparams[7] = args.heads
    hparams[4] = hparams[8] = args.layers
    hparams[10] = 1  # F16 matrices

    rng = random.Random(args.seed)
    with open(args.out, "wb") as f:
        f.write(struct.pack("<I", 0x67676D6C))
        f.write(struct.pack("<11i", *hparams))
        f.write(filters_and_vocab)
        for name, ne, ttype, kind in tensor_list(n_vocab, n_audio_ctx, n_text_ctx, n_mels, args.state, args.layers):
            count = math.prod(ne)
            key = name.encode()
            f.write(struct.pack("<3i", len(ne), len(key), ttype))
            f.write(struct.pack(f"<{len(ne)}i", *ne))
            f.write(key)
            f.write(struct.pack(f"<{count}{'e' if ttype == GGML_TYPE_F16 else 'f'}", *values(rng, count, kind)))


if __name__ == "__main__":
    main()
