// Compiles the functions that follow for x86 AVX-512 with BF16 (F, BW, VL,
// VNNI, BF16) on top of AVX2, FMA and F16C. The same rules as
// avx2/target_begin.h: include after every other header, pair with
// target_end.h.

#if defined(__clang__)
#    pragma clang attribute push(                                                                                   \
        __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16,avx2,fma,f16c"))), apply_to = function)
#elif defined(__GNUC__)
#    pragma GCC push_options
#    pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16,avx2,fma,f16c")
#endif
