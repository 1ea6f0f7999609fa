// Writes the reference data of tests/test_quants_k.cpp with ggml 0.25.1
// (see README.md in this folder for the command line). Not part of loom's
// build: it links ggml's own libggml-base.
//
// input.bin: NROWS rows of NPER floats, then NPER importance weights.
// <type>.bin: the rows quantized by ggml_quantize_chunk without an
// importance matrix; then (types with an importance-matrix quantizer) with
// one; then (types with a dequantization) the first row's quantized bytes
// dequantized, NPER floats. Q8_1 and Q8_K, which ggml_quantize_chunk does
// not take, come from quantize_row_q8_1_ref and quantize_row_q8_K_ref.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ggml.h"

extern "C" {
void quantize_row_q8_K_ref(const float * x, void * y, int64_t k);
void dequantize_row_q8_K(const void * x, float * y, int64_t k);
}

namespace {

constexpr int NROWS = 3;
constexpr int NPER  = 512;

uint64_t state = 0x9e3779b97f4a7c15ull;
// Uniform in [-1, 1) from a 64-bit LCG (the top 24 bits).
float next_uniform() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return float(state >> 40) / float(1 << 23) - 1.0f;
}

void write(const std::string & path, const void * p, size_t n, const char * mode) {
    FILE * f = std::fopen(path.c_str(), mode);
    if (f == nullptr || std::fwrite(p, 1, n, f) != n) {
        std::fprintf(stderr, "cannot write %s\n", path.c_str());
        std::exit(1);
    }
    std::fclose(f);
}

} // namespace

int main(int argc, char ** argv) {
    const std::string dir = argc > 1 ? argv[1] : ".";
    std::vector<float> x(NROWS * NPER), imatrix(NPER);
    for (int r = 0; r < NROWS; ++r) {
        for (int i = 0; i < NPER; ++i) {
            float v = next_uniform();
            if (r == 0) {
                v = v * 2.0f + 0.25f * next_uniform(); // signed, with outliers
                if (i % 97 == 5) v *= 25.0f;
                if (i >= 64 && i < 96) v = 0.0f; // a zero block of 32
                if (i % 53 == 0) v = 0.0f;
            } else if (r == 1) {
                v = 3.0f + v; // positive: the minimum matters
                if (i == 300) v = 40.0f;
            } else {
                v = 1e-3f * v; // small, second super-block all zero
                if (i == 17) v = -0.5f;
                if (i >= 256) v = 0.0f;
            }
            x[r * NPER + i] = v;
        }
    }
    for (int i = 0; i < NPER; ++i) {
        imatrix[i] = i % 41 == 7 ? 0.0f : 0.1f + 4.0f * (0.5f + 0.5f * next_uniform());
    }
    write(dir + "/input.bin", x.data(), x.size() * sizeof(float), "wb");
    write(dir + "/input.bin", imatrix.data(), imatrix.size() * sizeof(float), "ab");

    const ggml_type types[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
                               GGML_TYPE_Q8_0, GGML_TYPE_Q8_1, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K,
                               GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_Q8_K};
    for (ggml_type t : types) {
        const ggml_type_traits * tt       = ggml_get_type_traits(t);
        const size_t             row_size = ggml_row_size(t, NPER);
        std::vector<uint8_t>     plain(NROWS * row_size, 0), imat(NROWS * row_size, 0), ref(NROWS * row_size, 0);
        const bool               chunk = t != GGML_TYPE_Q8_1 && t != GGML_TYPE_Q8_K;
        if (chunk) {
            ggml_quantize_chunk(t, x.data(), plain.data(), 0, NROWS, NPER, nullptr);
            ggml_quantize_chunk(t, x.data(), imat.data(), 0, NROWS, NPER, imatrix.data());
            // The reference row function gives the same bytes in 0.25.1.
            for (int r = 0; r < NROWS; ++r) {
                tt->from_float_ref(x.data() + r * NPER, ref.data() + r * row_size, NPER);
            }
            if (std::memcmp(ref.data(), plain.data(), plain.size()) != 0) {
                std::fprintf(stderr, "%s: from_float_ref differs from ggml_quantize_chunk\n", tt->type_name);
                return 1;
            }
        } else if (t == GGML_TYPE_Q8_1) {
            tt->from_float_ref(x.data(), plain.data(), NROWS * NPER);
        } else {
            quantize_row_q8_K_ref(x.data(), plain.data(), NROWS * NPER);
        }
        const std::string path = dir + "/" + tt->type_name + ".bin";
        write(path, plain.data(), plain.size(), "wb");
        if (chunk) {
            write(path, imat.data(), imat.size(), "ab");
        }
        std::vector<float> deq(NPER);
        if (tt->to_float != nullptr) {
            tt->to_float(plain.data(), deq.data(), NPER);
        } else if (t == GGML_TYPE_Q8_K) {
            dequantize_row_q8_K(plain.data(), deq.data(), NPER);
        }
        if (tt->to_float != nullptr || t == GGML_TYPE_Q8_K) {
            write(path, deq.data(), deq.size() * sizeof(float), "ab");
        }
        std::printf("%-5s %zu bytes per row\n", tt->type_name, row_size);
    }
    return 0;
}
