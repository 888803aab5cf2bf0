/* The ABI's structs, each with its header filled in, for the C tests and the fuzz drivers
 * (plain C, inline functions only). */
#ifndef RH_ABI_STRUCTS_H
#define RH_ABI_STRUCTS_H

#include <stdint.h>
#include <string.h>

#include "rh_cuda.h"

static inline RhCudaEngineOptions rh_options(int32_t dtype, int64_t P) {
  RhCudaEngineOptions o;
  memset(&o, 0, sizeof o);
  o.abi_version = RH_CUDA_ABI_VERSION;
  o.struct_size = sizeof o;
  o.dtype = dtype;
  o.device_id = -1;
  o.n_parameters = P;
  return o;
}

static inline RhCudaUpdateConfig rh_config(int64_t n_features_in, int32_t penalty) {
  RhCudaUpdateConfig c;
  memset(&c, 0, sizeof c);
  c.abi_version = RH_CUDA_ABI_VERSION;
  c.struct_size = sizeof c;
  c.n_features_in = n_features_in;
  c.max_iter = 100;
  c.tau = 1.345;
  c.bandwidth_scale = 1.0;
  c.tolerance = 1e-10;
  c.ridge = 0.0;
  c.penalty = penalty;
  c.lambda_scale = 1.0;
  return c;
}

static inline RhCudaHostBatch rh_batch(const void* x, const void* y, const void* w, int64_t n,
                                       int64_t columns, double weight) {
  RhCudaHostBatch b;
  memset(&b, 0, sizeof b);
  b.abi_version = RH_CUDA_ABI_VERSION;
  b.struct_size = sizeof b;
  b.x_design = x;
  b.y = y;
  b.sample_weight = w;
  b.n_rows = n;
  b.n_columns = columns;
  b.batch_weight = weight;
  return b;
}

static inline RhCudaDiagnostics rh_diagnostics(void) {
  RhCudaDiagnostics d;
  memset(&d, 0, sizeof d);
  d.abi_version = RH_CUDA_ABI_VERSION;
  d.struct_size = sizeof d;
  return d;
}

static inline RhCudaHostState rh_state_out(void* coefficients, void* information) {
  RhCudaHostState s;
  memset(&s, 0, sizeof s);
  s.abi_version = RH_CUDA_ABI_VERSION;
  s.struct_size = sizeof s;
  s.coefficients = coefficients;
  s.information = information;
  return s;
}

static inline RhCudaHostStateView rh_state_view(const void* coefficients, const void* information) {
  RhCudaHostStateView v;
  memset(&v, 0, sizeof v);
  v.abi_version = RH_CUDA_ABI_VERSION;
  v.struct_size = sizeof v;
  v.coefficients = coefficients;
  v.information = information;
  return v;
}

static inline RhCudaPrediction rh_prediction(const void* x, void* out, int64_t n, int64_t columns,
                                             int64_t n_features_in, int32_t location) {
  RhCudaPrediction p;
  memset(&p, 0, sizeof p);
  p.abi_version = RH_CUDA_ABI_VERSION;
  p.struct_size = sizeof p;
  p.x_design = x;
  p.prediction = out;
  p.n_rows = n;
  p.n_columns = columns;
  p.n_features_in = n_features_in;
  p.input_location = location;
  return p;
}

#endif /* RH_ABI_STRUCTS_H */
