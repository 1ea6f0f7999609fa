#include "features.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#    include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#    include <sys/auxv.h>
#    include <sys/prctl.h>
#endif
#if defined(__aarch64__) && defined(__APPLE__)
#    include <sys/sysctl.h>
#endif

#include "ggml-cpu.h"

namespace loom::cpu {

namespace {

Features detect() {
    Features f;
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        f.sse3  = c & bit_SSE3;
        f.ssse3 = c & bit_SSSE3;
        f.fma  = c & bit_FMA;
        f.f16c = c & bit_F16C;
        // AVX needs the OS to save the YMM state (OSXSAVE + XCR0 bits 1 and 2).
        const bool osxsave = c & bit_OSXSAVE;
        bool       ymm_ok  = false;
        bool       zmm_ok  = false;
        if (osxsave) {
            unsigned lo, hi;
            __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
            ymm_ok = (lo & 0x6) == 0x6;
            zmm_ok = (lo & 0xe6) == 0xe6;
        }
        f.avx = (c & bit_AVX) && ymm_ok;
        f.fma = f.fma && ymm_ok;
        f.f16c = f.f16c && ymm_ok;
        if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
            const unsigned max_subleaf = a;
            f.avx2       = (b & bit_AVX2) && ymm_ok;
            f.bmi2       = b & bit_BMI2;
            f.amx_int8   = d & (1u << 25); // leaf 7 EDX bit 25: AMX-INT8
            f.avx512f    = (b & bit_AVX512F) && zmm_ok;
            f.avx512bw   = (b & bit_AVX512BW) && zmm_ok;
            f.avx512vl   = (b & bit_AVX512VL) && zmm_ok;
            f.avx512vnni = (c & bit_AVX512VNNI) && zmm_ok;
            f.avx512vbmi = (c & bit_AVX512VBMI) && zmm_ok;
            // Leaf 7 subleaf 1, EAX bit 5: AVX512_BF16.
            if (max_subleaf >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) {
                f.avx512bf16 = (a & (1u << 5)) && zmm_ok;
                f.avx_vnni   = (a & (1u << 4)) && ymm_ok; // subleaf 1 EAX bit 4: AVX-VNNI
            }
        }
    }
    unsigned max_ext = __get_cpuid_max(0x80000000u, nullptr);
    if (max_ext >= 0x80000004u) {
        char brand[49] = {};
        for (unsigned i = 0; i < 3; ++i) {
            __get_cpuid(0x80000002u + i, &a, &b, &c, &d);
            std::memcpy(brand + 16 * i + 0, &a, 4);
            std::memcpy(brand + 16 * i + 4, &b, 4);
            std::memcpy(brand + 16 * i + 8, &c, 4);
            std::memcpy(brand + 16 * i + 12, &d, 4);
        }
        f.brand = brand;
    }
#endif
#if defined(__aarch64__) && defined(__linux__)
    // The kernel's hardware capability bits (asm/hwcap.h; spelled out, as
    // older C libraries' headers lack the newer ones).
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    f.neon    = hw & (1ul << 1);  // HWCAP_ASIMD
    f.fp16_va = hw & (1ul << 10); // HWCAP_ASIMDHP
    f.dotprod = hw & (1ul << 20); // HWCAP_ASIMDDP
    f.sve     = hw & (1ul << 22); // HWCAP_SVE
    f.i8mm    = hw2 & (1ul << 13); // HWCAP2_I8MM
    f.sme     = hw2 & (1ul << 23); // HWCAP2_SME
    f.sme2    = hw2 & (1ul << 37); // HWCAP2_SME2
    if (f.sve) {
        // PR_SVE_GET_VL: the vector length in bytes in the low 16 bits.
        const int vl = prctl(51, 0, 0, 0, 0);
        f.sve_bytes  = vl > 0 ? (vl & 0xffff) : 0;
    }
#elif defined(__aarch64__) && defined(__APPLE__)
    auto has = [](const char * name) {
        int    v  = 0;
        size_t sz = sizeof(v);
        return sysctlbyname(name, &v, &sz, nullptr, 0) == 0 && v != 0;
    };
    f.neon    = true;
    f.fp16_va = has("hw.optional.arm.FEAT_FP16");
    f.dotprod = has("hw.optional.arm.FEAT_DotProd");
    f.i8mm    = has("hw.optional.arm.FEAT_I8MM");
    f.sme     = has("hw.optional.arm.FEAT_SME");
    f.sme2    = has("hw.optional.arm.FEAT_SME2");
#elif defined(__aarch64__)
    f.neon = true; // Advanced SIMD is part of the 64-bit Arm base architecture
#endif
    if (f.brand.empty()) {
        if (FILE * fp = std::fopen("/proc/cpuinfo", "r")) {
            char line[512];
            while (std::fgets(line, sizeof(line), fp)) {
                if (std::strncmp(line, "model name", 10) == 0) {
                    if (const char * colon = std::strchr(line, ':')) {
                        f.brand = colon + 1;
                    }
                    break;
                }
            }
            std::fclose(fp);
        }
    }
    // Trim spaces and the newline.
    const auto first = f.brand.find_first_not_of(" \t\n");
    const auto last  = f.brand.find_last_not_of(" \t\n");
    f.brand          = first == std::string::npos ? "CPU" : f.brand.substr(first, last - first + 1);
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE)
    f.l1d_bytes = std::max(0L, sysconf(_SC_LEVEL1_DCACHE_SIZE));
    f.l2_bytes  = std::max(0L, sysconf(_SC_LEVEL2_CACHE_SIZE));
#endif
    return f;
}

} // namespace

const Features & features() {
    static const Features f = detect();
    return f;
}

int numa_nodes() {
    static const int n = [] {
        int count = 0;
        for (int i = 0; i < 4096; ++i) {
            char path[64];
            std::snprintf(path, sizeof(path), "/sys/devices/system/node/node%d", i);
            if (access(path, F_OK) != 0) {
                break;
            }
            ++count;
        }
        return count > 0 ? count : 1;
    }();
    return n;
}

void host_memory(size_t * free, size_t * total) {
    const long pages     = sysconf(_SC_PHYS_PAGES);
    const long page_size = sysconf(_SC_PAGESIZE);
    *total               = pages > 0 && page_size > 0 ? size_t(pages) * size_t(page_size) : 0;
    *free                = *total;
    if (FILE * fp = std::fopen("/proc/meminfo", "r")) {
        char line[256];
        while (std::fgets(line, sizeof(line), fp)) {
            unsigned long long kb = 0;
            if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                *free = size_t(kb) * 1024;
                break;
            }
        }
        std::fclose(fp);
    }
}

} // namespace loom::cpu

extern "C" {
int ggml_cpu_has_sse3(void) {
    return loom::cpu::features().sse3;
}
int ggml_cpu_has_avx(void) {
    return loom::cpu::features().avx;
}
int ggml_cpu_has_avx2(void) {
    return loom::cpu::features().avx2;
}
int ggml_cpu_has_f16c(void) {
    return loom::cpu::features().f16c;
}
int ggml_cpu_has_fma(void) {
    return loom::cpu::features().fma;
}
int ggml_cpu_has_avx512(void) {
    return loom::cpu::features().avx512f;
}
int ggml_cpu_has_avx512_vnni(void) {
    return loom::cpu::features().avx512vnni;
}
int ggml_cpu_has_avx512_vbmi(void) {
    return loom::cpu::features().avx512vbmi;
}
int ggml_cpu_has_avx512_bf16(void) {
    return loom::cpu::features().avx512bf16;
}
int ggml_cpu_has_ssse3(void) {
    return loom::cpu::features().ssse3;
}
int ggml_cpu_has_avx_vnni(void) {
    return loom::cpu::features().avx_vnni;
}
int ggml_cpu_has_bmi2(void) {
    return loom::cpu::features().bmi2;
}
int ggml_cpu_has_amx_int8(void) {
    return loom::cpu::features().amx_int8;
}
// 64-bit Arm's features, as the processor reports them (0 elsewhere).
int ggml_cpu_has_neon(void) {
    return loom::cpu::features().neon;
}
int ggml_cpu_has_arm_fma(void) {
    return loom::cpu::features().neon; // FMLA is part of Advanced SIMD on 64-bit Arm
}
int ggml_cpu_has_fp16_va(void) {
    return loom::cpu::features().fp16_va;
}
int ggml_cpu_has_dotprod(void) {
    return loom::cpu::features().dotprod;
}
int ggml_cpu_has_matmul_int8(void) {
    return loom::cpu::features().i8mm;
}
int ggml_cpu_has_sve(void) {
    return loom::cpu::features().sve;
}
int ggml_cpu_get_sve_cnt(void) {
    return loom::cpu::features().sve_bytes;
}
int ggml_cpu_has_sme(void) {
    return loom::cpu::features().sme;
}
int ggml_cpu_has_sme2(void) {
    return loom::cpu::features().sme2;
}
// Features of other processor families: never present on the processors
// loom's kernels are built for (x86-64 and 64-bit Arm), 0 as ggml answers there.
int ggml_cpu_has_riscv_v(void) {
    return 0;
}
int ggml_cpu_get_rvv_vlen(void) {
    return 0;
}
int ggml_cpu_has_vsx(void) {
    return 0;
}
int ggml_cpu_has_vxe(void) {
    return 0;
}
int ggml_cpu_has_wasm_simd(void) {
    return 0;
}
int ggml_cpu_has_llamafile(void) {
    return 0;
}

void ggml_numa_init(enum ggml_numa_strategy numa) {
    (void) numa; // threads are not bound to nodes; the strategy only selects that nothing moves
    (void) loom::cpu::numa_nodes();
}
bool ggml_is_numa(void) {
    return loom::cpu::numa_nodes() > 1;
}
}
