// Ends the region opened by target_begin.h.

#if defined(__clang__)
#    pragma clang attribute pop
#elif defined(__GNUC__)
#    pragma GCC pop_options
#endif
