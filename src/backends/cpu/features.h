#pragma once

// What the processor offers, read once.

#include <string>

namespace loom::cpu {

struct Features {
    bool        sse3 = false, avx = false, avx2 = false, fma = false, f16c = false, avx512f = false;
    bool        avx512bw = false, avx512vl = false, avx512vnni = false, avx512vbmi = false;
    bool        avx512bf16 = false; // vdpbf16ps and the bf16 conversions
    bool        ssse3 = false, bmi2 = false, avx_vnni = false, amx_int8 = false;
    // 64-bit Arm (AT_HWCAP/AT_HWCAP2 on Linux, sysctl on Apple): Advanced
    // SIMD, its dot product (SDOT/UDOT), int8 matrix multiply (SMMLA),
    // half-precision arithmetic, SVE (sve_bytes: its vector length) and SME.
    bool neon = false, dotprod = false, i8mm = false, fp16_va = false, sve = false, sme = false, sme2 = false;
    int  sve_bytes = 0;
    std::string brand; // processor name
    long        l1d_bytes = 0, l2_bytes = 0; // per core, 0 where the system does not say
};

const Features & features();

// NUMA nodes of the machine (/sys/devices/system/node), at least 1.
int numa_nodes();

// Physical memory of the machine and what is available now, in bytes.
void host_memory(size_t * free, size_t * total);

} // namespace loom::cpu
