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

/* RH_HAVE_AVX512_KERNELS: kernels whose best form differs by instruction set are also built in
 * an AVX-512 translation unit or function and chosen at run time with rh_cpu_has_avx512(). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(RH_NO_MULTIVERSION) && __GNUC__ >= 12
#define RH_HAVE_AVX512_KERNELS 1
/* The x86-64-v4 level the AVX-512 code is compiled for. */
static inline int rh_cpu_has_avx512(void) {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
}
#else
#define RH_HAVE_AVX512_KERNELS 0
#endif

#endif /* RH_MULTIVERSION_H */
