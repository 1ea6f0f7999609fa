#pragma once

// What the processor offers, read once.

#include <string>

namespace loom::cpu {

struct Features {
    bool        sse3 = false, avx = false, avx2 = false, fma = false, f16c = false, avx512f = false;
    bool        avx512bw = false, avx512vl = false, avx512vnni = false, avx512vbmi = false;
    bool        avx512bf16 = false; // vdpbf16ps and the bf16 conversions
    std::string brand; // processor name
};

const Features & features();

// Physical memory of the machine and what is available now, in bytes.
void host_memory(size_t * free, size_t * total);

} // namespace loom::cpu
