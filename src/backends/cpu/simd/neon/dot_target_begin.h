// Compiles the functions that follow for the dot-product extension
// (armv8.2-a+dotprod, SDOT). Include after every other header, as
// avx2/target_begin.h says why; pair with dot_target_end.h.
//
// Where the compiler's flags have the extension already (-mcpu=neoverse-n1,
// -march=native on such a core) no target is pushed: GCC inlines a function
// only into one whose architecture includes the callee's, and a pushed
// armv8.2-a+dotprod lacks some of those cores' other extensions, so the
// core's helpers (fp16_to_fp32 ...) would be called, not inlined.

#if !defined(__ARM_FEATURE_DOTPROD)
#    define LOOM_NEON_DOT_TARGET 1
#    if defined(__clang__)
#        pragma clang attribute push(__attribute__((target("dotprod"))), apply_to = function)
#    elif defined(__GNUC__)
#        pragma GCC push_options
#        pragma GCC target("arch=armv8.2-a+dotprod")
#    endif
#endif
