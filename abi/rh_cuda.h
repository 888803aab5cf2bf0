/*
 * rh_cuda.h -- the renewable-huber engine ABI, version 2.
 *
 * One header, two engines behind it (librh_cpu: portable C11; librh_cuda: CUDA C++), and any
 * third-party engine that exports the same 17 symbols. The machine-readable source of truth is
 * rh_cuda_contract.json beside this file; tests fail when this header drifts from it.
 *
 * Conventions that hold for every function below:
 *   - Every struct begins with abi_version (must be RH_CUDA_ABI_VERSION) and struct_size (must be
 *     at least the size this header declares; larger is accepted so fields can be appended).
 *   - Status-returning functions return an RhCudaStatus code. On any status other than
 *     RH_CUDA_SUCCESS the engine's committed state is exactly what it was before the call, and a
 *     message naming the offending field and value is available from rh_cuda_engine_last_error()
 *     (calls on an engine) or rh_cuda_last_error() (calls without one).
 *   - Floating-point arrays (coefficients, information, design, targets, weights, predictions)
 *     hold the engine's dtype: float when created with RH_CUDA_DTYPE_FLOAT32, double with
 *     RH_CUDA_DTYPE_FLOAT64. Scalars in structs are always double / int64_t.
 *   - Matrices are row-major and C-contiguous. The intercept, when present, is the LAST column.
 *   - No exception, longjmp or abort crosses this boundary.
 *   - Thread-safety: distinct engines may be used concurrently from distinct threads; one engine
 *     must not be used by two threads at the same time. Functions without an engine are
 *     thread-safe.
 *
 * Only <stdint.h> is required. Compiles as C99, C11 and C++17; may be included more than once.
 */
#ifndef RH_CUDA_H
#define RH_CUDA_H

#include <stdint.h>

#if defined(_WIN32)
#if defined(RH_CUDA_BUILDING_ENGINE)
#define RH_CUDA_API __declspec(dllexport)
#else
#define RH_CUDA_API __declspec(dllimport)
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define RH_CUDA_API __attribute__((visibility("default")))
#else
#define RH_CUDA_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ===================================================================== versions and codes */

#define RH_CUDA_ABI_VERSION 2u

/* Status codes (int32_t). */
#define RH_CUDA_SUCCESS 0
#define RH_CUDA_INVALID_ARGUMENT 1
#define RH_CUDA_UNAVAILABLE 2
#define RH_CUDA_ALLOCATION_FAILED 3
#define RH_CUDA_CUDA_ERROR 4
#define RH_CUDA_CUBLAS_ERROR 5
#define RH_CUDA_CUSOLVER_ERROR 6
#define RH_CUDA_NUMERICAL_ERROR 7
#define RH_CUDA_INTERNAL_ERROR 8

/* Element types (int32_t). */
#define RH_CUDA_DTYPE_FLOAT32 1
#define RH_CUDA_DTYPE_FLOAT64 2

/* Penalties (int32_t): NONE runs damped Newton, L1 runs LAMM proximal steps. */
#define RH_CUDA_PENALTY_NONE 0
#define RH_CUDA_PENALTY_L1 1

/* Memory locations (int32_t); zero is invalid so an uninitialised field is caught. */
#define RH_CUDA_MEMORY_HOST 1
#define RH_CUDA_MEMORY_DEVICE 2

/* Engine flags (uint64_t, RhCudaEngineOptions.reserved0). Unknown bits are INVALID_ARGUMENT.
 * FAST_MATH (TF32 dense algebra) is valid with float32 only. The CPU engine accepts both and
 * reports them as requested but not enabled. */
#define RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS ((uint64_t)1u << 0)
#define RH_CUDA_ENGINE_FLAG_FAST_MATH ((uint64_t)1u << 1)

typedef int32_t RhCudaStatus;

/* Opaque engine handle. */
typedef struct RhCudaEngine RhCudaEngine;

/* ============================================================================== structs */

/* Engine creation options. 32 bytes. */
typedef struct RhCudaEngineOptions {
  uint32_t abi_version;
  uint32_t struct_size;
  int32_t dtype;        /* RH_CUDA_DTYPE_* */
  int32_t device_id;    /* CPU engine: -1 (host). CUDA engine: 0 <= device_id < device count. */
  int64_t n_parameters; /* P = n_features_in (+1 with an intercept); the CUDA engine: <= 46340 */
  uint64_t reserved0;   /* RH_CUDA_ENGINE_FLAG_* bits */
} RhCudaEngineOptions;

/* The two state structs end with the meat matrix K of the sandwich covariance (docs/algorithm.md,
 * "Inference"): K = sum over the stream's batches of X' diag(w psi(r)^2) X at each batch's
 * committed coefficients, always P x P row-major DOUBLES whatever the engine dtype. The fields
 * from `meat` on were appended to ABI 2: a caller built before them passes struct_size 56 (the
 * offset of `meat`), which stays valid and means "no K" (restore: the engine then holds no K;
 * export: nothing of K is written). Any struct_size between 56 and the full size is refused. */

/* A state to restore (input). 64 bytes (56 without K). Pointers borrowed for the duration of
 * the call. */
typedef struct RhCudaHostStateView {
  uint32_t abi_version;
  uint32_t struct_size;
  const void* coefficients; /* P values */
  const void* information;  /* P x P row-major; may be asymmetric: preserved and solved as is */
  int64_t n_samples_seen;   /* rows seen, zero-weight rows included; >= 0 */
  int64_t batch_count;      /* >= 0; zero exactly when n_samples_seen is zero */
  double previous_lambda;   /* finite, >= 0 */
  double weight_sum;        /* finite, >= 0; > 0 exactly when batch_count > 0 */
  const void* meat;         /* P x P doubles, finite with a diagonal >= 0; NULL: the state has no
                               K, and the engine gives none (meat_available 0) until a state with
                               K is restored or a new engine starts a stream */
} RhCudaHostStateView;

/* A state to export into (output). 72 bytes (56 without K). The caller owns the arrays (P and
 * P x P values, P x P doubles for meat); they are borrowed for the duration of the call. */
typedef struct RhCudaHostState {
  uint32_t abi_version;
  uint32_t struct_size;
  void* coefficients;
  void* information;
  int64_t n_samples_seen;
  int64_t batch_count;
  double previous_lambda;
  double weight_sum;
  void* meat;             /* P x P doubles, written when non-NULL and meat_available is 1;
                             NULL: not exported */
  int32_t meat_available; /* out: 1 when the engine holds K for every batch of its stream (a new
                             engine does, with K = 0); 0 after a restore without K or an L1
                             batch (no valid intervals after selection) */
  int32_t reserved1;      /* out: set to 0 */
} RhCudaHostState;

/* Solver configuration of one update. 72 bytes. */
typedef struct RhCudaUpdateConfig {
  uint32_t abi_version;
  uint32_t struct_size;
  int64_t n_features_in;  /* p > 0; P - p must be 0 (no intercept) or 1 (intercept) */
  int64_t max_iter;       /* 1 .. INT32_MAX */
  double tau;             /* Huber threshold, finite > 0 */
  double bandwidth_scale; /* finite > 0; the batch's h must come out normal (see update) */
  double tolerance;       /* finite > 0 */
  double ridge;           /* finite >= 0, added after dividing by the cumulative weight */
  int32_t penalty;        /* RH_CUDA_PENALTY_* */
  int32_t reserved0;      /* must be 0 */
  double lambda_scale;    /* finite >= 0; used with RH_CUDA_PENALTY_L1 */
} RhCudaUpdateConfig;

/* One batch in host memory. 56 bytes. Pointers borrowed for the duration of the call, each
 * aligned to the engine dtype (4 or 8 bytes): a misaligned one is INVALID_ARGUMENT before
 * anything reads it (as for every array of the ABI: states, predictions, row statistics).
 * n_columns is P (design already expanded; the intercept column is the caller's last column)
 * or n_features_in (the engine appends the all-ones intercept column itself, without a copy). */
typedef struct RhCudaHostBatch {
  uint32_t abi_version;
  uint32_t struct_size;
  const void* x_design;      /* n_rows x n_columns row-major */
  const void* y;             /* n_rows */
  const void* sample_weight; /* n_rows finite >= 0, or NULL for all ones */
  int64_t n_rows;            /* >= 1 */
  int64_t n_columns;
  double batch_weight; /* sum of the weights (n_rows when sample_weight is NULL), > 0 */
} RhCudaHostBatch;

/* One batch in device memory on the engine's device. 56 bytes. Same layout and rules as
 * RhCudaHostBatch; the engine reads the caller's memory in place on its stream, which waits for
 * no other stream: the data must be complete when the call is made (written on the engine's
 * stream, see rh_cuda_engine_stream, or synchronised; a cudaMemcpy from pageable host memory
 * may return before its copy lands). Every pointer
 * must be aligned to the engine dtype (4 or 8 bytes): a misaligned one is INVALID_ARGUMENT
 * before anything reads it (also for device predictions). */
typedef struct RhCudaDeviceBatch {
  uint32_t abi_version;
  uint32_t struct_size;
  const void* x_design;
  const void* y;
  const void* sample_weight;
  int64_t n_rows;
  int64_t n_columns;
  double batch_weight;
} RhCudaDeviceBatch;

/* A prediction request. 56 bytes. Pointers borrowed for the duration of the call; the output
 * lives in the same memory space as the input. */
typedef struct RhCudaPrediction {
  uint32_t abi_version;
  uint32_t struct_size;
  const void* x_design; /* n_rows x n_columns row-major (n_columns = P or n_features_in) */
  void* prediction;     /* n_rows values, written (on failure: rh_cuda_engine_predict) */
  int64_t n_rows;       /* >= 1 */
  int64_t n_columns;
  int64_t n_features_in;
  int32_t input_location; /* RH_CUDA_MEMORY_HOST or RH_CUDA_MEMORY_DEVICE (CUDA engine only) */
  int32_t reserved0;      /* must be 0 */
} RhCudaPrediction;

/* Diagnostics of the last update (output). 48 bytes. */
typedef struct RhCudaDiagnostics {
  uint32_t abi_version;
  uint32_t struct_size;
  int64_t iterations;
  int32_t converged;                 /* 1 or 0 */
  int32_t used_regularized_fallback; /* 1 when a minimum-norm (SVD) solve ran */
  double objective;                  /* F, plus lambda * ||beta_penalised||_1 for L1 */
  double lambda_value;
  double bandwidth; /* the capped h of this batch */
} RhCudaDiagnostics;

/* Runtime facts (output). 24 bytes. The CPU engine reports zeros. */
typedef struct RhCudaRuntimeInfo {
  uint32_t abi_version;
  uint32_t struct_size;
  int32_t runtime_version;
  int32_t driver_version;
  int32_t device_count;
  int32_t reserved0;
} RhCudaRuntimeInfo;

/* Engine features (output). 48 bytes. */
typedef struct RhCudaEngineFeatures {
  uint32_t abi_version;
  uint32_t struct_size;
  uint64_t requested_flags;
  uint64_t enabled_flags;
  uint64_t graph_captures;
  uint64_t graph_replays;
  uint64_t graph_fallbacks;
} RhCudaEngineFeatures;

/* ==================================================================== library queries */

/* Returns RH_CUDA_ABI_VERSION of the library. Thread-safe. */
RH_CUDA_API uint32_t rh_cuda_abi_version(void);

/* Returns the calling thread's last failure text of calls made without an engine ("" when none).
 * Owned by the library, valid until the thread's next call into it. Thread-local. */
RH_CUDA_API const char* rh_cuda_last_error(void);

/* available: out, 1 when this library can create an engine on this machine, else 0.
 * Borrowed for the call. Thread-safe. */
RH_CUDA_API RhCudaStatus rh_cuda_is_available(int32_t* available);

/* count: out, number of CUDA devices (0 for the CPU engine). Borrowed for the call.
 * Thread-safe. */
RH_CUDA_API RhCudaStatus rh_cuda_device_count(int32_t* count);

/* info: out, runtime and driver versions and device count (zeros for the CPU engine); its header
 * must be filled in by the caller. Borrowed for the call. Thread-safe. */
RH_CUDA_API RhCudaStatus rh_cuda_runtime_info(RhCudaRuntimeInfo* info);

/* ==================================================================== engine lifetime */

/* options: borrowed for the call. out_engine: out, a new engine with an empty state (zero
 * coefficients and information, zero counters), owned by the caller until
 * rh_cuda_engine_destroy. On failure *out_engine is set to NULL. The CUDA engine refuses
 * n_parameters above 46340 (its dense solver takes 32-bit sizes: 46340^2 < 2^31) with
 * RH_CUDA_INVALID_ARGUMENT. Thread-safe. */
RH_CUDA_API RhCudaStatus rh_cuda_engine_create(const RhCudaEngineOptions* options,
                                               RhCudaEngine** out_engine);

/* Releases everything the engine owns. NULL is a no-op returning RH_CUDA_SUCCESS. The handle
 * must not be used afterwards. */
RH_CUDA_API RhCudaStatus rh_cuda_engine_destroy(RhCudaEngine* engine);

/* ======================================================================== engine state */

/* Replaces the committed state with a validated copy of *state (finite values, non-negative
 * counters, batch_count == 0 exactly when n_samples_seen == 0, weight_sum > 0 exactly when
 * batch_count > 0: a state without a batch has weight 0; meat, when given, finite with a
 * non-negative diagonal). state and its arrays: borrowed for the call. */
RH_CUDA_API RhCudaStatus rh_cuda_engine_restore(RhCudaEngine* engine,
                                                const RhCudaHostStateView* state);

/* Copies the committed state into the caller's arrays and counters (and K, see RhCudaHostState).
 * state and its arrays: borrowed for the call. */
RH_CUDA_API RhCudaStatus rh_cuda_engine_copy_state(RhCudaEngine* engine, RhCudaHostState* state);

/* ============================================================================= updates */

/* One renewable batch transition (docs/algorithm.md) on host data. batch, config: borrowed for
 * the call. diagnostics: out, borrowed for the call. With RH_CUDA_PENALTY_NONE and K held, the
 * batch's X' diag(w psi(r)^2) X is added to K in the sweep that forms its information; an L1
 * batch ends K (meat_available 0). The new state is committed only when the
 * whole transition succeeded; NaN or Inf in the batch is refused and never committed (the
 * committed state is untouched; which bad value is reported first is unspecified). The batch's
 * bandwidth h = min(bandwidth_scale / (sqrt(N) ln(max(n_features_in, 2))), tau), N =
 * weight_sum + batch_weight, must be a positive normal double (>= 2.2250738585072014e-308),
 * else RH_CUDA_INVALID_ARGUMENT before any work. */
RH_CUDA_API RhCudaStatus rh_cuda_engine_update_host(RhCudaEngine* engine,
                                                    const RhCudaHostBatch* batch,
                                                    const RhCudaUpdateConfig* config,
                                                    RhCudaDiagnostics* diagnostics);

/* As rh_cuda_engine_update_host, then exports the committed state into *state with the same
 * synchronisation. state and its arrays: out, borrowed for the call. */
RH_CUDA_API RhCudaStatus rh_cuda_engine_update_host_with_state(RhCudaEngine* engine,
                                                               const RhCudaHostBatch* batch,
                                                               const RhCudaUpdateConfig* config,
                                                               RhCudaDiagnostics* diagnostics,
                                                               RhCudaHostState* state);

/* stream: out, the engine's CUDA stream (cudaStream_t as an integer) for DLPack stream
 * negotiation; 0 for the CPU engine. The stream is owned by the engine, valid until
 * rh_cuda_engine_destroy. */
RH_CUDA_API RhCudaStatus rh_cuda_engine_stream(RhCudaEngine* engine, uintptr_t* stream);

/* One renewable batch transition on device data, read in place on the engine's stream, then the
 * committed state exported into host memory. batch: its pointers must be device memory on the
 * engine's device, borrowed for the call (the caller keeps them alive until the call returns).
 * The CPU engine returns RH_CUDA_UNAVAILABLE. */
RH_CUDA_API RhCudaStatus rh_cuda_engine_update_device_with_state(RhCudaEngine* engine,
                                                                 const RhCudaDeviceBatch* batch,
                                                                 const RhCudaUpdateConfig* config,
                                                                 RhCudaDiagnostics* diagnostics,
                                                                 RhCudaHostState* state);

/* ============================================================================ predicting */

/* prediction = X_design . coefficients for the committed state. prediction and its arrays:
 * borrowed for the call; the output is in the input's memory space. Device input is accepted by
 * the CUDA engine only (the CPU engine returns RH_CUDA_UNAVAILABLE); the call returns after the
 * output is written. NaN or Inf anywhere in X_design is RH_CUDA_INVALID_ARGUMENT naming the
 * first such value's row and column, in every engine and for device input too (checked on the
 * device before anything is written); the output is then left untouched.
 * The output on failure (any status but SUCCESS; the committed state never changes):
 *   - host output (both engines): untouched, whatever the failure.
 *   - device output (CUDA engine): untouched by every refusal and by every failure before the
 *     prediction kernel is launched; a failure the CUDA runtime reports at that launch or at
 *     the final wait for it (RH_CUDA_CUDA_ERROR, or RH_CUDA_ALLOCATION_FAILED when the runtime
 *     reports it as out of memory) leaves the output's contents unspecified: any of its rows
 *     may have been written.
 * A failed call never returns while work it queued may still read or write the caller's
 * arrays. */
RH_CUDA_API RhCudaStatus rh_cuda_engine_predict(RhCudaEngine* engine,
                                                const RhCudaPrediction* prediction);

/* ===================================================================== engine services */

/* Waits for all work the engine queued (a no-op for the CPU engine). */
RH_CUDA_API RhCudaStatus rh_cuda_engine_synchronize(RhCudaEngine* engine);

/* features: out, requested and enabled RH_CUDA_ENGINE_FLAG_* bits and CUDA Graph counters.
 * Borrowed for the call. */
RH_CUDA_API RhCudaStatus rh_cuda_engine_features(RhCudaEngine* engine,
                                                 RhCudaEngineFeatures* features);

/* Returns the engine's last failure text ("" when none; "engine is null" for NULL). Owned by
 * the engine, valid until the next call on it. */
RH_CUDA_API const char* rh_cuda_engine_last_error(const RhCudaEngine* engine);

#ifdef __cplusplus
}
#endif

#endif /* RH_CUDA_H */
