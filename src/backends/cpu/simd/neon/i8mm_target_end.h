// Ends the region opened by i8mm_target_begin.h.

#if defined(LOOM_NEON_I8MM_TARGET)
#    if defined(__clang__)
#        pragma clang attribute pop
#    elif defined(__GNUC__)
#        pragma GCC pop_options
#    endif
#    undef LOOM_NEON_I8MM_TARGET
#endif
