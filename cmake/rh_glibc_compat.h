/* Force-included into librh_cpu's C files when RH_GLIBC_COMPAT=ON (cmake/RhPortable.cmake).
 *
 * Binds the libm functions that glibc 2.27 (float) and 2.29 (double) re-versioned to the
 * original version of the architecture, which every glibc still exports. The old and new
 * versions compute the same values; the old ones also set errno on domain and pole errors, which
 * the engine never reads (it is built with -fno-math-errno). A .symver line for a function the
 * file does not call adds nothing to the object. Never part of the installed headers. */
#ifndef RH_GLIBC_COMPAT_H
#define RH_GLIBC_COMPAT_H

#if defined(__linux__)
#if defined(__x86_64__)
#define RH_GLIBC_BASE_VERSION "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define RH_GLIBC_BASE_VERSION "GLIBC_2.17"
#elif defined(__powerpc64__) && defined(__LITTLE_ENDIAN__)
#define RH_GLIBC_BASE_VERSION "GLIBC_2.17"
#endif
#endif

#ifdef RH_GLIBC_BASE_VERSION
#define RH_GLIBC_OLD_SYMBOL(name) __asm__(".symver " #name "," #name "@" RH_GLIBC_BASE_VERSION);
RH_GLIBC_OLD_SYMBOL(exp)
RH_GLIBC_OLD_SYMBOL(exp2)
RH_GLIBC_OLD_SYMBOL(log)
RH_GLIBC_OLD_SYMBOL(log2)
RH_GLIBC_OLD_SYMBOL(pow)
RH_GLIBC_OLD_SYMBOL(expf)
RH_GLIBC_OLD_SYMBOL(exp2f)
RH_GLIBC_OLD_SYMBOL(logf)
RH_GLIBC_OLD_SYMBOL(log2f)
RH_GLIBC_OLD_SYMBOL(powf)
#undef RH_GLIBC_OLD_SYMBOL
#else
#error "RH_GLIBC_COMPAT: no known original glibc symbol version for this architecture"
#endif

#endif /* RH_GLIBC_COMPAT_H */
