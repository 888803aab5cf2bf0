/* RH_MULTIVERSION: compile a hot function once per instruction-set level and pick the clone at
 * load time (gcc on x86-64 Linux); empty elsewhere. */
#ifndef RH_MULTIVERSION_H
#define RH_MULTIVERSION_H

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(RH_NO_MULTIVERSION)
#if __GNUC__ >= 12
#define RH_MULTIVERSION __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define RH_MULTIVERSION __attribute__((target_clones("avx2", "default")))
#endif
#else
#define RH_MULTIVERSION
#endif

#endif /* RH_MULTIVERSION_H */
