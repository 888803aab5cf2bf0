#include "update_context.hpp"

#include "engine_error.hpp"
#include "kernels.hpp"

namespace rh {

namespace {

void gemv_transposed(cublasHandle_t h, const RowView<float>& rows, const float* u, float* out) {
  const float one = 1.0f, zero = 0.0f;
  check_cublas(cublasSgemv(h, CUBLAS_OP_N, static_cast<int>(rows.ncols_x),
                           static_cast<int>(rows.n), &one, rows.x, static_cast<int>(rows.ldx), u,
                           1, &zero, out, 1),
               "cublasSgemv (X'u)");
}

void gemv_transposed(cublasHandle_t h, const RowView<double>& rows, const double* u,
                     double* out) {
  const double one = 1.0, zero = 0.0;
  check_cublas(cublasDgemv(h, CUBLAS_OP_N, static_cast<int>(rows.ncols_x),
                           static_cast<int>(rows.n), &one, rows.x, static_cast<int>(rows.ldx), u,
                           1, &zero, out, 1),
               "cublasDgemv (X'u)");
}

// The row-major n x P scaled design is the column-major P x n matrix A; A A' is the Gram. GEMM,
// not SYRK: cuBLAS's SYRK measured 5-60x slower on these tall-skinny shapes on an H200. Only
// the upper triangle is read afterwards (mirrored), so the information stays exactly symmetric.
void gram_upper(cublasHandle_t h, int64_t P, int64_t n, const float* scaled, float* out) {
  const float one = 1.0f, zero = 0.0f;
  const int p = static_cast<int>(P);
  check_cublas(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, p, p, static_cast<int>(n), &one, scaled,
                           p, scaled, p, &zero, out, p),
               "cublasSgemm (Gram)");
}

void gram_upper(cublasHandle_t h, int64_t P, int64_t n, const double* scaled, double* out) {
  const double one = 1.0, zero = 0.0;
  const int p = static_cast<int>(P);
  check_cublas(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, p, p, static_cast<int>(n), &one, scaled,
                           p, scaled, p, &zero, out, p),
               "cublasDgemm (Gram)");
}

}  // namespace

template <class T>
void UpdateContext<T>::row_pass(bool with_gram, bool set_objective, bool skip_when_done) {
  T* scaled = with_gram ? e.ws.scaled_rows.as<T>() : nullptr;
  launch_row_pass<T>(rows, beta(), k.tau, device_scalars(), e.ws.residual.as<double>(),
                     e.ws.score.as<T>(), scaled, e.ws.row_partials.as<double>(), skip_when_done,
                     e.stream);
  launch_reduce_row_partials(e.ws.row_partials.as<double>(), row_blocks(rows.n, rows.ncols_x), set_objective,
                             skip_when_done, device_scalars(), e.stream);
  gemv_transposed(e.blas, rows, e.ws.score.as<T>(), xtu());
  if (with_gram) gram_upper(e.blas, rows.P, rows.n, scaled, gram());
}

template <class T>
void UpdateContext<T>::gradient(bool skip_when_done) {
  launch_gradient<T>(information64(), beta(), beta0(), xtu(), rows.ncols_x, k, device_scalars(),
                     grad(), jdelta(), skip_when_done, e.stream);
}

template <class T>
void UpdateContext<T>::enqueue_readback() {
  check_cuda(cudaMemcpyAsync(e.ws.host_scalars.as<DeviceScalars>() + 1, device_scalars(),
                             sizeof(DeviceScalars), cudaMemcpyDeviceToHost, e.stream),
             "cudaMemcpyAsync (status)");
}

template <class T>
void UpdateContext<T>::wait_for_status() {
  e.synchronize();
  if (data_checked) return;
  data_checked = true;
  const DeviceScalars& s = status();
  if (s.first_bad_x != kNoIndex) {
    const unsigned long long cols = static_cast<unsigned long long>(rows.ncols_x);
    fail(RH_CUDA_INVALID_ARGUMENT, "%s.x_design has a non-finite value at row %llu, column %llu",
         batch_name, s.first_bad_x / cols, s.first_bad_x % cols);
  }
  if (s.first_bad_y != kNoIndex) {
    fail(RH_CUDA_INVALID_ARGUMENT, "%s.y has a non-finite value at index %llu", batch_name,
         s.first_bad_y);
  }
  if (s.first_bad_w != kNoIndex) {
    fail(RH_CUDA_INVALID_ARGUMENT, "%s.sample_weight has a non-finite value at index %llu",
         batch_name, s.first_bad_w);
  }
  if (s.first_negative_w != kNoIndex) {
    fail(RH_CUDA_INVALID_ARGUMENT, "%s.sample_weight has a negative value at index %llu",
         batch_name, s.first_negative_w);
  }
  if (s.weight_mismatch) {
    fail(RH_CUDA_INVALID_ARGUMENT,
         "%s.batch_weight %.17g does not match the sum of sample_weight %.17g (relative "
         "tolerance 1e-6)",
         batch_name, k.claimed_batch_weight, s.batch_weight);
  }
}

template struct UpdateContext<float>;
template struct UpdateContext<double>;

}  // namespace rh
