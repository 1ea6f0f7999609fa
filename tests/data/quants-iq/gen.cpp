// Writes the quants-iq reference data with ggml 0.25.1 (see README.md).
// Built by hand against a ggml build, not part of loom's build:
//   g++ -std=c++17 -O1 -I$GGML/include gen.cpp -L$BUILD/bin -lggml-base -Wl,-rpath,$BUILD/bin -o gen
//   ./gen .

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ggml.h"
#include "inputs.h"

using namespace quants_iq;

namespace {

uint16_t fp16_bits(float f) {
    return ggml_fp32_to_fp16(f);
}

// A random finite fp16 scale, 2^-6 .. 2^2 with either sign.
uint16_t random_scale(uint32_t key) {
    const float m = 1.0f + float(mix(key) % 1024u) / 1024.0f;
    const int   e = int(mix(key + 1) % 9u) - 6;
    float       v = m;
    for (int i = 0; i < e; ++i) v *= 2.0f;
    for (int i = 0; i > e; --i) v /= 2.0f;
    if (mix(key + 2) % 4u == 0) v = -v;
    return fp16_bits(v);
}

void put16(uint8_t * p, uint16_t v) {
    std::memcpy(p, &v, 2);
}

// Random bytes with the fp16 scales of the format made finite.
std::vector<uint8_t> random_blocks(ggml_type type, size_t nblocks, size_t bsize) {
    std::vector<uint8_t> b(nblocks * bsize);
    for (size_t i = 0; i < b.size(); ++i) b[i] = uint8_t(mix(uint32_t(i) * 31u + uint32_t(type) * 1000003u));
    for (size_t k = 0; k < nblocks; ++k) {
        uint8_t *      blk = b.data() + k * bsize;
        const uint32_t key = uint32_t(type) * 7919u + uint32_t(k) * 13u;
        switch (type) {
            case GGML_TYPE_MXFP4:
            case GGML_TYPE_NVFP4: break; // every scale byte is a finite value
            case GGML_TYPE_TQ1_0: put16(blk + 52, random_scale(key)); break;
            case GGML_TYPE_TQ2_0: put16(blk + 64, random_scale(key)); break;
            case GGML_TYPE_IQ1_M: {
                // the fp16 scale is the top nibble of the four uint16 at offset 48
                const uint16_t d = random_scale(key);
                for (int i = 0; i < 4; ++i) {
                    uint16_t w;
                    std::memcpy(&w, blk + 48 + 2 * i, 2);
                    w = uint16_t((w & 0x0fff) | (((d >> (4 * i)) & 0xf) << 12));
                    std::memcpy(blk + 48 + 2 * i, &w, 2);
                }
                break;
            }
            default: put16(blk, random_scale(key)); break;
        }
    }
    return b;
}

bool write_type(const char * dir, ggml_type type) {
    const ggml_type_traits * tr   = ggml_get_type_traits(type);
    const int64_t            n    = int64_t(kRows) * kPerRow;
    const size_t             row  = ggml_row_size(type, kPerRow);
    std::vector<float>       x(static_cast<size_t>(n)), imatrix(static_cast<size_t>(kPerRow));
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = input_value(uint32_t(i));
    for (int j = 0; j < kPerRow; ++j) imatrix[size_t(j)] = imatrix_value(uint32_t(j));

    ggml_quantize_init(type);
    std::vector<uint8_t> chunk(row * kRows);
    const size_t         wrote = ggml_quantize_chunk(type, x.data(), chunk.data(), 0, kRows, kPerRow, imatrix.data());
    if (wrote != chunk.size()) return false;
    std::vector<float> chunk_f(static_cast<size_t>(n));
    tr->to_float(chunk.data(), chunk_f.data(), n);

    const int32_t        has_ref = tr->from_float_ref != nullptr;
    std::vector<uint8_t> ref(has_ref ? chunk.size() : 0);
    if (has_ref) tr->from_float_ref(x.data(), ref.data(), n);

    const size_t         nrand = size_t(kRandomN / tr->blck_size);
    std::vector<uint8_t> rnd   = random_blocks(type, nrand, tr->type_size);
    std::vector<float>   rnd_f(static_cast<size_t>(kRandomN));
    tr->to_float(rnd.data(), rnd_f.data(), kRandomN);

    const std::string path = std::string(dir) + "/" + tr->type_name + ".bin";
    FILE *            f    = std::fopen(path.c_str(), "wb");
    if (!f) return false;
    const int32_t head[5] = {int32_t(type), kPerRow, kRows, has_ref, int32_t(nrand)};
    std::fwrite(kMagic, 1, 4, f);
    std::fwrite(head, sizeof head, 1, f);
    std::fwrite(chunk.data(), 1, chunk.size(), f);
    std::fwrite(chunk_f.data(), sizeof(float), chunk_f.size(), f);
    std::fwrite(ref.data(), 1, ref.size(), f);
    std::fwrite(rnd.data(), 1, rnd.size(), f);
    std::fwrite(rnd_f.data(), sizeof(float), rnd_f.size(), f);
    return std::fclose(f) == 0;
}

} // namespace

int main(int argc, char ** argv) {
    const char *    dir     = argc > 1 ? argv[1] : ".";
    const ggml_type types[] = {GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_IQ2_S, GGML_TYPE_IQ3_XXS,
                               GGML_TYPE_IQ3_S,   GGML_TYPE_IQ1_S,  GGML_TYPE_IQ1_M, GGML_TYPE_IQ4_NL,
                               GGML_TYPE_IQ4_XS,  GGML_TYPE_TQ1_0,  GGML_TYPE_TQ2_0, GGML_TYPE_MXFP4,
                               GGML_TYPE_NVFP4,   GGML_TYPE_Q1_0,   GGML_TYPE_Q2_0};
    for (ggml_type t : types) {
        if (!write_type(dir, t)) {
            std::fprintf(stderr, "failed: %s\n", ggml_type_name(t));
            return 1;
        }
    }
    ggml_quantize_free();
    return 0;
}
