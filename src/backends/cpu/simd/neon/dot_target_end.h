// Ends the region opened by dot_target_begin.h.

#if defined(LOOM_NEON_DOT_TARGET)
#    if defined(__clang__)
#        pragma clang attribute pop
#    elif defined(__GNUC__)
#        pragma GCC pop_options
#    endif
#    undef LOOM_NEON_DOT_TARGET
#endif
