// Compiles the functions that follow for the dot product and the 8-bit
// integer matrix multiply (armv8.2-a+dotprod+i8mm: SDOT, SMMLA). Include
// after every other header, as avx2/target_begin.h says why; pair with
// i8mm_target_end.h. No target is pushed where the compiler's flags have
// both already (dot_target_begin.h says why).

#if !(defined(__ARM_FEATURE_DOTPROD) && defined(__ARM_FEATURE_MATMUL_INT8))
#    define LOOM_NEON_I8MM_TARGET 1
#    if defined(__clang__)
#        pragma clang attribute push(__attribute__((target("dotprod,i8mm"))), apply_to = function)
#    elif defined(__GNUC__)
#        pragma GCC push_options
#        pragma GCC target("arch=armv8.2-a+dotprod+i8mm")
#    endif
#endif
