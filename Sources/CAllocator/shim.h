// glibc's allocator settings (<malloc.h>, which Swift's Glibc module leaves out); nothing elsewhere.
#if defined(__linux__) && __has_include(<malloc.h>)
#include <malloc.h>
#include <features.h>
#endif

// Sets how many free bytes at the top of a thread's heap glibc keeps before it gives them back to the kernel. Answers
// 1 when set, 0 when refused or where the C library is not glibc.
static inline int iapkit_set_trim_threshold(int bytes) {
#if defined(__GLIBC__) && defined(M_TRIM_THRESHOLD)
    return mallopt(M_TRIM_THRESHOLD, bytes);
#else
    (void)bytes;
    return 0;
#endif
}
