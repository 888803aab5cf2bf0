/*
 * rh_cpu_bench -- whole partial_fit stream timings of librh_cpu through the ABI.
 *
 * For every standard shape of docs/benchmarks.md x {float64, float32} x {none, l1}: a new
 * engine, every batch of the stream through rh_cuda_engine_update_host, the engine destroyed,
 * all inside the timer (the "cold" lifecycle). Prints the median and min wall time of the
 * repetitions and the median CPU time of all threads, in milliseconds per stream.
 *
 * Several --library arguments are timed interleaved (one repetition of each library in turn,
 * order alternating each round) so a before/after comparison sees the same machine load.
 * Timings are never asserted: this is a measuring tool, not a test.
 *
 *   rh_cpu_bench [--library PATH]... [--repeats K] [--shape NAME]... [--dtype f32|f64]
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rh_cuda.h"

#ifndef RH_BENCH_DEFAULT_LIBRARY
#define RH_BENCH_DEFAULT_LIBRARY "librh_cpu.so"
#endif

#define MAX_LIBRARIES 4
#define MAX_REPEATS 101

typedef struct Shape {
  const char* name;
  int64_t rows;
  int64_t features;
  int64_t batch;
} Shape;

static const Shape SHAPES[] = {
    {"latency", 4096, 16, 4096},
    {"reference", 100000, 90, 32768},
    {"wide", 16384, 256, 4096},
    {"streaming", 1000000, 32, 65536},
};
enum { N_SHAPES = sizeof SHAPES / sizeof SHAPES[0] };

/* The entry points the benchmark calls, resolved from one dlopen'ed library. */
typedef struct Library {
  const char* path;
  RhCudaStatus (*create)(const RhCudaEngineOptions*, RhCudaEngine**);
  RhCudaStatus (*destroy)(RhCudaEngine*);
  RhCudaStatus (*update)(RhCudaEngine*, const RhCudaHostBatch*, const RhCudaUpdateConfig*,
                         RhCudaDiagnostics*);
  const char* (*engine_error)(const RhCudaEngine*);
} Library;

static void* resolve(void* handle, const char* path, const char* name) {
  void* symbol = dlsym(handle, name);
  if (symbol == NULL) {
    fprintf(stderr, "rh_cpu_bench: %s has no symbol %s\n", path, name);
    exit(2);
  }
  return symbol;
}

static Library open_library(const char* path) {
  /* RTLD_LOCAL keeps two builds of the same engine from resolving into each other. */
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    fprintf(stderr, "rh_cpu_bench: cannot load %s: %s\n", path, dlerror());
    exit(2);
  }
  Library lib;
  lib.path = path;
  *(void**)&lib.create = resolve(handle, path, "rh_cuda_engine_create");
  *(void**)&lib.destroy = resolve(handle, path, "rh_cuda_engine_destroy");
  *(void**)&lib.update = resolve(handle, path, "rh_cuda_engine_update_host");
  *(void**)&lib.engine_error = resolve(handle, path, "rh_cuda_engine_last_error");
  return lib;
}

/* xorshift64* with Box-Muller: reproducible data on every platform. */
static uint64_t rng_state;
static double uniform01(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return ((double)((rng_state * 2685821657736338717ull) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
static double normal01(void) {
  return sqrt(-2.0 * log(uniform01())) * cos(6.283185307179586 * uniform01());
}

/* X ~ N(0,1), y = X beta + N(0, 0.2^2), with N(0, 8^2) added at rows of stride
 * max(100, n/100); stored in the target dtype. */
typedef struct Dataset {
  int32_t dtype;
  size_t elem;
  void* x;
  void* y;
} Dataset;

static Dataset make_dataset(const Shape* s, int shape_index, int32_t dtype) {
  rng_state = 0x9E3779B97F4A7C15ull ^ (uint64_t)(42 + shape_index);
  Dataset d;
  d.dtype = dtype;
  d.elem = dtype == RH_CUDA_DTYPE_FLOAT32 ? sizeof(float) : sizeof(double);
  d.x = malloc((size_t)(s->rows * s->features) * d.elem);
  d.y = malloc((size_t)s->rows * d.elem);
  double* beta = malloc((size_t)s->features * sizeof(double));
  if (d.x == NULL || d.y == NULL || beta == NULL) {
    fprintf(stderr, "rh_cpu_bench: out of memory for %s\n", s->name);
    exit(2);
  }
  for (int64_t j = 0; j < s->features; ++j) {
    beta[j] = normal01();
  }
  const int64_t stride = s->rows / 100 > 100 ? s->rows / 100 : 100;
  for (int64_t i = 0; i < s->rows; ++i) {
    double v = 0.0;
    for (int64_t j = 0; j < s->features; ++j) {
      double xij = normal01();
      if (dtype == RH_CUDA_DTYPE_FLOAT32) {
        ((float*)d.x)[i * s->features + j] = (float)xij;
        xij = (double)(float)xij;
      } else {
        ((double*)d.x)[i * s->features + j] = xij;
      }
      v += xij * beta[j];
    }
    v += 0.2 * normal01();
    if (i % stride == 0) {
      v += 8.0 * normal01();
    }
    if (dtype == RH_CUDA_DTYPE_FLOAT32) {
      ((float*)d.y)[i] = (float)v;
    } else {
      ((double*)d.y)[i] = v;
    }
  }
  free(beta);
  return d;
}

static double clock_ms(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

typedef struct StreamResult {
  double ms;
  double cpu_ms;      /* CPU time of all threads: less sensitive than ms to a loaded machine */
  int64_t iterations; /* summed over the batches */
  double objective;   /* of the last batch */
} StreamResult;

/* One cold partial_fit stream: create, every batch, destroy. The default estimator settings
 * (tau 1.345, tol 1e-6, ridge 1e-8, max_iter 100, fit_intercept) apply. */
static StreamResult run_stream(const Library* lib, const Shape* s, const Dataset* d,
                               int32_t penalty) {
  const int64_t P = s->features + 1;
  RhCudaEngineOptions options;
  memset(&options, 0, sizeof options);
  options.abi_version = RH_CUDA_ABI_VERSION;
  options.struct_size = sizeof options;
  options.dtype = d->dtype;
  options.device_id = -1;
  options.n_parameters = P;
  RhCudaUpdateConfig config;
  memset(&config, 0, sizeof config);
  config.abi_version = RH_CUDA_ABI_VERSION;
  config.struct_size = sizeof config;
  config.n_features_in = s->features;
  config.max_iter = 100;
  config.tau = 1.345;
  config.bandwidth_scale = 1.0;
  config.tolerance = 1e-6;
  config.ridge = 1e-8;
  config.penalty = penalty;
  config.lambda_scale = 1.0;

  StreamResult result = {0.0, 0.0, 0, 0.0};
  double start = clock_ms(CLOCK_MONOTONIC);
  double cpu_start = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
  RhCudaEngine* engine = NULL;
  if (lib->create(&options, &engine) != RH_CUDA_SUCCESS) {
    fprintf(stderr, "rh_cpu_bench: engine creation failed in %s\n", lib->path);
    exit(1);
  }
  for (int64_t first = 0; first < s->rows; first += s->batch) {
    int64_t rows = s->rows - first < s->batch ? s->rows - first : s->batch;
    RhCudaHostBatch batch;
    memset(&batch, 0, sizeof batch);
    batch.abi_version = RH_CUDA_ABI_VERSION;
    batch.struct_size = sizeof batch;
    batch.x_design = (const char*)d->x + (size_t)(first * s->features) * d->elem;
    batch.y = (const char*)d->y + (size_t)first * d->elem;
    batch.n_rows = rows;
    batch.n_columns = s->features;
    batch.batch_weight = (double)rows;
    RhCudaDiagnostics diagnostics;
    memset(&diagnostics, 0, sizeof diagnostics);
    diagnostics.abi_version = RH_CUDA_ABI_VERSION;
    diagnostics.struct_size = sizeof diagnostics;
    if (lib->update(engine, &batch, &config, &diagnostics) != RH_CUDA_SUCCESS) {
      fprintf(stderr, "rh_cpu_bench: update failed in %s: %s\n", lib->path,
              lib->engine_error(engine));
      exit(1);
    }
    result.iterations += diagnostics.iterations;
    result.objective = diagnostics.objective;
  }
  result.ms = clock_ms(CLOCK_MONOTONIC) - start;
  result.cpu_ms = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - cpu_start;
  lib->destroy(engine);
  return result;
}

static int compare_doubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static int selected(const char* name, const char* const* names, int count) {
  if (count == 0) {
    return 1;
  }
  for (int k = 0; k < count; ++k) {
    if (strcmp(name, names[k]) == 0) {
      return 1;
    }
  }
  return 0;
}

static void usage(void) {
  fprintf(stderr,
          "usage: rh_cpu_bench [--library PATH]... [--repeats K] [--shape NAME]... "
          "[--dtype f32|f64] [--penalty none|l1]\n");
  exit(2);
}

int main(int argc, char** argv) {
  const char* library_paths[MAX_LIBRARIES];
  const char* shape_names[N_SHAPES];
  int n_libraries = 0, n_shape_names = 0, repeats = 7;
  const char* dtype_filter = NULL;
  const char* penalty_filter = NULL;
  for (int a = 1; a < argc; ++a) {
    if (a + 1 >= argc) {
      usage();
    }
    if (strcmp(argv[a], "--library") == 0 && n_libraries < MAX_LIBRARIES) {
      library_paths[n_libraries++] = argv[++a];
    } else if (strcmp(argv[a], "--repeats") == 0) {
      repeats = atoi(argv[++a]);
      if (repeats < 1 || repeats > MAX_REPEATS) {
        fprintf(stderr, "rh_cpu_bench: --repeats must be in [1, %d]\n", MAX_REPEATS);
        return 2;
      }
    } else if (strcmp(argv[a], "--shape") == 0 && n_shape_names < N_SHAPES) {
      shape_names[n_shape_names++] = argv[++a];
    } else if (strcmp(argv[a], "--dtype") == 0) {
      dtype_filter = argv[++a];
    } else if (strcmp(argv[a], "--penalty") == 0) {
      penalty_filter = argv[++a];
    } else {
      usage();
    }
  }
  if (n_libraries == 0) {
    library_paths[n_libraries++] = RH_BENCH_DEFAULT_LIBRARY;
  }
  Library libraries[MAX_LIBRARIES];
  for (int l = 0; l < n_libraries; ++l) {
    libraries[l] = open_library(library_paths[l]);
    printf("# library %d: %s\n", l, library_paths[l]);
  }
  const char* threads = getenv("OMP_NUM_THREADS");
  double load = 0.0;
  FILE* loadavg = fopen("/proc/loadavg", "r");
  if (loadavg != NULL) {
    if (fscanf(loadavg, "%lf", &load) != 1) {
      load = -1.0;
    }
    fclose(loadavg);
  }
  printf("# OMP_NUM_THREADS=%s, load average at start %.2f, %d repetitions (median, min)\n",
         threads ? threads : "(unset)", load, repeats);
  printf("%-10s %-5s %-5s %-4s %10s %10s %10s %6s %22s\n", "shape", "dtype", "pen", "lib",
         "median_ms", "min_ms", "cpu_ms", "iters", "objective");

  const int32_t dtypes[2] = {RH_CUDA_DTYPE_FLOAT64, RH_CUDA_DTYPE_FLOAT32};
  const char* dtype_names[2] = {"f64", "f32"};
  const int32_t penalties[2] = {RH_CUDA_PENALTY_NONE, RH_CUDA_PENALTY_L1};
  const char* penalty_names[2] = {"none", "l1"};
  for (int si = 0; si < N_SHAPES; ++si) {
    const Shape* s = &SHAPES[si];
    if (!selected(s->name, shape_names, n_shape_names)) {
      continue;
    }
    for (int di = 0; di < 2; ++di) {
      if (dtype_filter != NULL && strcmp(dtype_filter, dtype_names[di]) != 0) {
        continue;
      }
      Dataset data = make_dataset(s, si, dtypes[di]);
      for (int pi = 0; pi < 2; ++pi) {
        if (penalty_filter != NULL && strcmp(penalty_filter, penalty_names[pi]) != 0) {
          continue;
        }
        double samples[MAX_LIBRARIES][MAX_REPEATS], cpu[MAX_LIBRARIES][MAX_REPEATS];
        StreamResult last[MAX_LIBRARIES];
        for (int l = 0; l < n_libraries; ++l) {
          run_stream(&libraries[l], s, &data, penalties[pi]); /* warm-up */
        }
        for (int r = 0; r < repeats; ++r) {
          for (int k = 0; k < n_libraries; ++k) {
            int l = r % 2 == 0 ? k : n_libraries - 1 - k;
            last[l] = run_stream(&libraries[l], s, &data, penalties[pi]);
            samples[l][r] = last[l].ms;
            cpu[l][r] = last[l].cpu_ms;
          }
        }
        for (int l = 0; l < n_libraries; ++l) {
          qsort(samples[l], (size_t)repeats, sizeof(double), compare_doubles);
          qsort(cpu[l], (size_t)repeats, sizeof(double), compare_doubles);
          printf("%-10s %-5s %-5s %-4d %10.2f %10.2f %10.2f %6lld %22.15e\n", s->name,
                 dtype_names[di], penalty_names[pi], l, samples[l][repeats / 2], samples[l][0],
                 cpu[l][repeats / 2], (long long)last[l].iterations, last[l].objective);
        }
        fflush(stdout);
      }
      free(data.x);
      free(data.y);
    }
  }
  return 0;
}
