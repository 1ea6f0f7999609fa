// Compiles the functions that follow for x86 AVX2 with FMA and F16C.
//
// Include after every other header: functions defined before it, such as the
// inline helpers of the core and the standard library, keep the baseline
// instruction set, so no copy of them built with AVX2 can be picked by the
// linker for code that runs on processors without it (which per-file
// compiler flags would risk). Pair with target_end.h.

#if defined(__clang__)
#    pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#elif defined(__GNUC__)
#    pragma GCC push_options
#    pragma GCC target("avx2,fma,f16c")
#endif
