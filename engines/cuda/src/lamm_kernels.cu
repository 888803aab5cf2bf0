// LAMM's attempts on the device (docs/algorithm.md, "Penalised"; lamm_solver.cu queues them):
// the candidates of a group of attempts and their model terms, the pick of the first acceptable
// one, and the curvature-bound start after the 40th rejection. Their objective sums and J delta
// for each come from one launch over the rows (lamm_trials_kernel, row_kernels.cu).
#include <cmath>

#include "engine_error.hpp"
#include "kernel_launch.cuh"
#include "step_common.cuh"

namespace rh {

namespace {

// One group of LAMM attempts: attempt first_attempt + a (a < count) uses phi 2^(first_attempt + a).
// trial_terms per attempt of the group: [0] the LAMM upper bound U, [1] ||Delta||^2,
// [2] <delta, sign(b0) m>, [3] phi. The three sums of kLammChunk attempts share one block
// reduction (the same shuffle tree and warp order as block_sum, so the same bits).
__global__ void lamm_candidates_kernel(int first_attempt, int count, const double* beta,
                                       const double* beta0, const double* g, BatchConstants k,
                                       const DeviceScalars* sc, double* candidates, double* deltas,
                                       double* trial_terms) {
  enter_stream_order();
  if (sc->state != kRunning || sc->lamm_accepted)
    return;
  __shared__ double shared[3 * kLammChunk * kWarps];
  __shared__ double sums[3 * kLammChunk];
  for (int c0 = 0; c0 < count; c0 += kLammChunk) {
    double acc[3 * kLammChunk];
#pragma unroll
    for (int i = 0; i < 3 * kLammChunk; ++i)
      acc[i] = 0.0;
    for (int64_t j = threadIdx.x; j < k.P; j += kThreads) {
      const double m = mask_of(k, j);
#pragma unroll
      for (int a = 0; a < kLammChunk; ++a) {
        const double phi = ldexp(sc->phi, first_attempt + c0 + a);
        double cand = soft_threshold(beta[j] - g[j] / phi, m * sc->lambda / phi);
        if (k.float_lamm)
          cand = static_cast<double>(static_cast<float>(cand));
        const double step = cand - beta[j];
        const double delta = cand - beta0[j];
        candidates[(c0 + a) * k.P + j] = cand;
        deltas[(c0 + a) * k.P + j] = delta;
        acc[3 * a + 0] += g[j] * step;
        acc[3 * a + 1] += step * step;
        acc[3 * a + 2] += delta * rh_sign(beta0[j]) * m;
      }
    }
    block_sums_to<kThreads>(acc, shared, sums);
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int a = 0; a < kLammChunk; ++a) {
        const double phi = ldexp(sc->phi, first_attempt + c0 + a);
        double* terms = trial_terms + (c0 + a) * 4;
        terms[0] = rh_lamm_upper(sc->objective, sums[3 * a + 0], phi, sums[3 * a + 1]);
        terms[1] = sums[3 * a + 1];
        terms[2] = sums[3 * a + 2];
        terms[3] = phi;
      }
    }
    __syncthreads();  // the next chunk reuses `shared` and `sums`
  }
}

// The first acceptable attempt of the group, in order. An iteration ends with the group that
// accepts. Nothing acceptable: after the first group the next one runs; after the 40th attempt
// the iteration pauses in kNeedsLammBound, uncounted, for the host's curvature-bound group;
// after that group the solve ends, converged when the last attempt's phi ||Delta||^2 / 2 is
// within rounding of F (docs/algorithm.md, "Penalised").
__global__ void lamm_pick_kernel(int count, int group, const double* partials, int blocks,
                                 const double* candidates, const double* deltas,
                                 const double* jdeltas, const double* trial_terms, BatchConstants k,
                                 DeviceScalars* sc, double* beta, int trials_gradient) {
  enter_stream_order();
  if (sc->state != kRunning || sc->lamm_accepted)
    return;
  __shared__ double shared[kLammChunk * kWarps];
  __shared__ double rho_sums[kLammMaxGroup];
  __shared__ double quad[kLammMaxGroup];
  __shared__ int chosen;
  const int warp = threadIdx.x >> 5;
  for (int a = warp; a < count; a += kWarps) {
    const double total = warp_column_sum(partials, blocks, count, a);
    if ((threadIdx.x & 31) == 0)
      rho_sums[a] = total;
  }
  for (int c0 = 0; c0 < count; c0 += kLammChunk) {
    double acc[kLammChunk];
#pragma unroll
    for (int a = 0; a < kLammChunk; ++a)
      acc[a] = 0.0;
    for (int64_t j = threadIdx.x; j < k.P; j += kThreads) {
#pragma unroll
      for (int a = 0; a < kLammChunk; ++a) {
        acc[a] += deltas[(c0 + a) * k.P + j] * jdeltas[(c0 + a) * k.P + j];
      }
    }
    block_sums_to<kThreads>(acc, shared, quad + c0);
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    chosen = -1;
    const double N = sc->total_weight;
    for (int a = 0; a < count; ++a) {
      const double D = sc->history_coef * trial_terms[a * 4 + 2];
      double f = k.float_lamm ? float_objective(rho_sums[a], quad[a], N, D)
                              : (rho_sums[a] + 0.5 * quad[a]) / N - D;
      // A candidate equal to beta bit for bit has objective exactly F ("The line search at
      // the rounding floor"), whatever the row sums' last bits.
      if (trial_terms[a * 4 + 1] == 0.0)
        f = sc->objective;
      if (rh_lamm_accepts(f, trial_terms[a * 4 + 0])) {
        chosen = a;
        sc->objective = f;
        sc->phi = rh_lamm_relaxed_phi(trial_terms[a * 4 + 3]);
        break;
      }
    }
    if (group == kLammGroupFirst)
      sc->lamm_trials_gradient = trials_gradient && chosen >= 0 ? chosen + 1 : 0;
    if (chosen >= 0 || group == kLammGroupBound)
      sc->iterations += 1;
    if (chosen < 0 && group == kLammGroupRest)
      sc->state = kNeedsLammBound;
    if (chosen < 0 && group == kLammGroupBound) {
      const double* last = trial_terms + (count - 1) * 4;
      const double predicted = last[3] * last[1] / 2.0;
      sc->state =
          rh_within_rounding(predicted, sc->objective, k.dtype_epsilon) ? kConverged : kStalled;
    }
  }
  __syncthreads();
  const int a = chosen;
  if (a < 0)
    return;
  double norm2 = 0.0;
  for (int64_t j = threadIdx.x; j < k.P; j += kThreads) {
    const double value = candidates[a * k.P + j];
    beta[j] = value;
    norm2 += value * value;
  }
  norm2 = block_sum<kThreads>(norm2, shared);
  if (threadIdx.x == 0) {
    sc->lamm_accepted = 1;
    if (!isfinite(norm2) || !isfinite(sc->objective)) {
      sc->state = kNonFinite;
    } else if (rh_step_converged(sqrt(trial_terms[a * 4 + 1]), sqrt(norm2), k.tolerance)) {
      sc->state = kConverged;
    }
  }
}

// LAMM's curvature-bound start after the 40th rejection (docs/algorithm.md, "Penalised").
// partials (one per block of launch_weighted_square_norms, or null once the bound is kept):
// L = (sum_i w_i ||x_i||^2 + trace J) / N, summed in a fixed order and kept in lamm_bound, which
// the batch fixes for the whole solve. Then phi = max(2^40 phi, L), 2^40 phi being the phi the
// 41st attempt would have had: the group that follows tries phi, 2 phi, ..., 2^7 phi.
__global__ void lamm_bound_kernel(const double* partials, int blocks, const double* J, int64_t P,
                                  DeviceScalars* sc) {
  enter_stream_order();
  if (sc->state != kRunning)
    return;
  __shared__ double shared[kThreads];
  if (partials != nullptr) {
    double sum_w_x2 = 0.0;
    for (int b = threadIdx.x; b < blocks; b += kThreads)
      sum_w_x2 += partials[b];
    double trace = 0.0;
    for (int64_t j = threadIdx.x; j < P; j += kThreads)
      trace += J[j * P + j];
    sum_w_x2 = block_sum<kThreads>(sum_w_x2, shared);
    trace = block_sum<kThreads>(trace, shared);
    if (threadIdx.x == 0)
      sc->lamm_bound = rh_lamm_phi_bound(sum_w_x2, trace, sc->total_weight);
  }
  if (threadIdx.x == 0)
    sc->phi = fmax(ldexp(sc->phi, kLammAttempts), sc->lamm_bound);
}

}  // namespace

void launch_lamm_candidates(int first_attempt, int count, const double* beta, const double* beta0,
                            const double* g, const BatchConstants& k, const DeviceScalars* sc,
                            double* candidates, double* deltas, double* trial_terms,
                            cudaStream_t s) {
  launch_kernel("lamm_candidates_kernel", lamm_candidates_kernel, 1, kThreads, s, first_attempt,
                count, beta, beta0, g, k, sc, candidates, deltas, trial_terms);
}

void launch_lamm_pick(int count, LammGroup group, const double* partials, int blocks,
                      const double* candidates, const double* deltas, const double* jdeltas,
                      const double* trial_terms, const BatchConstants& k, DeviceScalars* sc,
                      double* beta, bool trials_gradient, cudaStream_t s) {
  launch_kernel("lamm_pick_kernel", lamm_pick_kernel, 1, kThreads, s, count,
                static_cast<int>(group), partials, blocks, candidates, deltas, jdeltas, trial_terms,
                k, sc, beta, trials_gradient ? 1 : 0);
}

void launch_lamm_bound(const double* partials, int blocks, const double* J, int64_t P,
                       DeviceScalars* sc, cudaStream_t s) {
  launch_kernel("lamm_bound_kernel", lamm_bound_kernel, 1, kThreads, s, partials, blocks, J, P, sc);
}

}  // namespace rh
