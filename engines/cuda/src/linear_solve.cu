// The Newton step's solve ladder (docs/decisions.md, "Linear solve ladder"): Cholesky when H is
// bitwise symmetric, then, on the equilibrated system, LU with partial pivoting, then the SVD.
// All in double. Systems of
// up to Engine::small_dense_max parameters are factored and solved by one single-block kernel,
// larger ones up to Engine::cluster_cholesky.max_p by one cluster of blocks; beyond, cuSOLVER
// factors and one single-block kernel judges the factor and solves. The same ladder
// solves with the majoriser M = [G_m + J] / N + ridge I of the Newton fallback (docs/algorithm.md,
// "Unpenalised"): the matrix is assembled from whichever Gram the caller passes.
#include "engine_error.hpp"
#include "kernels.hpp"
#include "solvers.hpp"

namespace rh {

namespace {

template <class T>
void refuse_if_injected(UpdateContext<T>& ctx) {
  if (ctx.e.injected == InjectedFailure::Cusolver) {
    fail(RH_CUDA_CUSOLVER_ERROR,
         "linear solve failed: injected cuSOLVER failure (the test build's switch)");
  }
}

template <class T>
void assemble(UpdateContext<T>& ctx, const T* gram) {
  launch_assemble_hessian<T>(gram, ctx.information64(), ctx.k, ctx.device_scalars(),
                             ctx.e.ws.hessian.template as<double>(), ctx.e.stream);
}

// Above the cluster Cholesky's limit: cuSOLVER's factor, then one kernel's verdict and solve.
template <class T>
void cusolver_cholesky_solve(UpdateContext<T>& ctx, const T* gram) {
  Engine& e = ctx.e;
  static_assert(kCholeskyFill == CUBLAS_FILL_MODE_LOWER,
                "launch_cholesky_verdict_solve reads a lower factor");
  const int n = static_cast<int>(ctx.k.P);
  assemble(ctx, gram);
  // H is stored whole, so either triangle will do: cuSOLVER's lower factorisation measured
  // faster on an H200 (cusolverDnDpotrf, float64: n = 91 54 us vs 74 us upper; n = 257 139 us
  // vs 231 us).
  check_cusolver(cusolverDnDpotrf(e.solver, kCholeskyFill, n, e.ws.hessian.as<double>(), n,
                                  e.ws.solver_work.as<double>(), e.solver_work_elems,
                                  e.ws.solver_info.as<int>()),
                 "cusolverDnDpotrf");
  // The acceptance test and, on an accepted factor, both triangular solves in one kernel
  // (cuSOLVER's potrs measured about 60 us at n = 257 on an H200: two trsv launches).
  launch_cholesky_verdict_solve<T>(e.ws.hessian.as<double>(), e.ws.solver_info.as<int>(), gram,
                                   ctx.information64(), ctx.k, ctx.device_scalars(), ctx.grad(),
                                   e.ws.dir.as<double>(), e.ws.tile_inverses.as<double>(),
                                   e.cholesky_solve_shared, e.stream);
}

}  // namespace

template <class T>
void enqueue_cholesky_attempt(UpdateContext<T>& ctx, const T* gram, double* candidate) {
  refuse_if_injected(ctx);
  Engine& e = ctx.e;
  if (ctx.small_dense()) {
    // Factor, acceptance test, the solve for the next direction, J dir and the candidate in one
    // kernel.
    launch_small_cholesky_solve<T>(gram, ctx.information64(), ctx.k, ctx.device_scalars(),
                                   ctx.grad(), e.ws.dir.as<double>(), e.ws.jdir.as<double>(),
                                   ctx.beta(), candidate, e.stream);
    return;
  }
  if (ctx.k.P <= e.cluster_cholesky.max_p) {
    // Assembly, factor, acceptance test and both solves in one cluster of blocks.
    launch_cluster_cholesky_solve<T>(gram, ctx.information64(), ctx.grad(), ctx.k,
                                     ctx.device_scalars(), e.ws.dir.as<double>(),
                                     e.cluster_cholesky.shared_bytes, e.stream);
  } else {
    cusolver_cholesky_solve(ctx, gram);
  }
  if (candidate != nullptr) {
    launch_newton_candidate(ctx.beta(), e.ws.dir.as<double>(), ctx.device_scalars(), candidate,
                            ctx.k.P, e.stream);
  }
}

// LU's pivot test and the SVD's rank cutoff compare columns with each other, so both run on the
// equilibrated system diag(d) H diag(d) y = d g, dir = d y (docs/decisions.md, "Linear solve
// ladder"): raw units alone never make H look singular. H is assembled anew before each
// factorisation (cuSOLVER overwrites it). Synchronisations: one for LU's verdict, and on the SVD
// rung one for its rank and, when the equilibrated system is rank deficient, one for the rank of H
// itself.
template <class T>
bool solve_without_cholesky(UpdateContext<T>& ctx, const T* gram) {
  refuse_if_injected(ctx);
  Engine& e = ctx.e;
  const int64_t P = ctx.k.P;
  const int n = static_cast<int>(P);
  const double eps = ctx.k.ladder_epsilon;
  double* H = e.ws.hessian.as<double>();
  double* dir = e.ws.dir.as<double>();
  int* info = e.ws.solver_info.as<int>();
  double* d = e.ws.equilibration.as<double>();
  double* dg = d + P;
  double* equilibrated_dir = d + 2 * P;
  DeviceScalars* sc = ctx.device_scalars();

  bool unit = false;  // d = 1: the equilibrated matrix overflowed, H goes on unscaled
  auto assemble_system = [&] {
    assemble(ctx, gram);
    if (!unit)
      launch_equilibrate_matrix(H, d, P, sc, e.stream);
  };
  auto lu_factor = [&] {
    check_cusolver(cusolverDnDgetrf(e.solver, n, n, H, n, e.ws.solver_work.as<double>(),
                                    e.ws.pivots.as<int>(), info),
                   "cusolverDnDgetrf");
    launch_check_factor(H, info, P, eps, sc, e.stream);
    ctx.enqueue_readback();
    ctx.wait_for_status();
  };
  assemble(ctx, gram);
  launch_equilibration(H, ctx.grad(), P, false, d, dg, sc, e.stream);
  launch_equilibrate_matrix(H, d, P, sc, e.stream);
  lu_factor();
  if (!ctx.status().equilibrated_finite) {
    // No Newton matrix overflows so (|H_ij| <= sqrt(H_ii H_jj) when H is positive
    // semi-definite); whatever did is solved unscaled.
    unit = true;
    launch_equilibration(H, ctx.grad(), P, true, d, dg, sc, e.stream);
    assemble_system();
    lu_factor();
  }
  if (ctx.status().factor_ok) {
    check_cuda(cudaMemcpyAsync(dir, dg, P * sizeof(double), cudaMemcpyDeviceToDevice, e.stream),
               "cudaMemcpyAsync (rhs)");
    check_cusolver(
        cusolverDnDgetrs(e.solver, CUBLAS_OP_N, n, 1, H, n, e.ws.pivots.as<int>(), dir, n, info),
        "cusolverDnDgetrs");
    launch_scale_vector(dir, d, P, e.stream);
    return false;
  }
  ctx.used_svd = true;
  auto svd_solve = [&](const double* rhs) {
    check_cusolver(
        cusolverDnDgesvdj(e.solver, CUSOLVER_EIG_MODE_VECTOR, 0, n, n, H, n,
                          e.ws.singular_values.as<double>(), e.ws.left_vectors.as<double>(), n,
                          e.ws.right_vectors.as<double>(), n, e.ws.solver_work.as<double>(),
                          e.solver_work_elems, info, e.svd_params),
        "cusolverDnDgesvdj");
    launch_svd_solve(e.ws.left_vectors.as<double>(), e.ws.singular_values.as<double>(),
                     e.ws.right_vectors.as<double>(), rhs, P, eps, e.ws.svd_scratch.as<double>(),
                     dir, &sc->svd_rank, e.stream);
    ctx.enqueue_readback();
    ctx.wait_for_status();
    return ctx.status().svd_rank;
  };
  assemble_system();
  const int rank = svd_solve(dg);
  if (rank < n && !unit) {
    // Rank deficient after equilibration. Where the cutoff on H itself keeps the same rank
    // (collinear columns of like scale), the step is H's minimum-norm solution, the norm of
    // beta; where raw units make it cut more, the equilibrated one.
    check_cuda(cudaMemcpyAsync(equilibrated_dir, dir, P * sizeof(double), cudaMemcpyDeviceToDevice,
                               e.stream),
               "cudaMemcpyAsync (equilibrated solution)");
    assemble(ctx, gram);
    if (svd_solve(ctx.grad()) == rank)
      return true;
    check_cuda(cudaMemcpyAsync(dir, equilibrated_dir, P * sizeof(double), cudaMemcpyDeviceToDevice,
                               e.stream),
               "cudaMemcpyAsync (equilibrated solution)");
  }
  launch_scale_vector(dir, d, P, e.stream);
  return rank < n;
}

#define RH_INSTANTIATE_LINEAR_SOLVE(T)                                             \
  template void enqueue_cholesky_attempt<T>(UpdateContext<T>&, const T*, double*); \
  template bool solve_without_cholesky<T>(UpdateContext<T>&, const T*);

RH_INSTANTIATE_LINEAR_SOLVE(float)
RH_INSTANTIATE_LINEAR_SOLVE(double)

}  // namespace rh
