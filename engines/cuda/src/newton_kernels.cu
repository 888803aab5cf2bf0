// Newton's step selection on the device (docs/algorithm.md, "Unpenalised"; newton_solver.cu
// queues it): the line search's pick among the 27 trials, or the speculative whole step's
// verdict, the step and convergence tests.
#include <cmath>

#include "engine_error.hpp"
#include "kernel_launch.cuh"
#include "newton_step.cuh"

namespace rh {

namespace {

// The select kernel's block: a warp per line-search trial, so the 27 sums over the trials
// kernel's block partials take one round of loads instead of four.
constexpr int kSelectThreads = 1024;
static_assert(kSelectThreads / 32 >= kLineSearchTrials, "a warp per trial");

// The line search's pick (newton_choose_step) by one block of kSelectThreads threads.
__global__ void __launch_bounds__(kSelectThreads)
    newton_select_kernel(const double* partials, int blocks, const double* dir,
                         const double* jdelta, const double* jdir, const double* beta0,
                         const double* g, int direction, BatchConstants k, DeviceScalars* sc,
                         double* beta) {
  enter_stream_order();
  newton_choose_step<kSelectThreads>(partials, blocks, dir, jdelta, jdir, beta0, g, direction, 0, k,
                                     sc, beta);
}

}  // namespace

void launch_newton_select(const double* partials, int blocks, const double* dir,
                          const double* jdelta, const double* jdir, const double* beta0,
                          const double* g, StepDirection direction, const BatchConstants& k,
                          DeviceScalars* sc, double* beta, cudaStream_t s) {
  launch_kernel("newton_select_kernel", newton_select_kernel, 1, kSelectThreads, s, partials,
                blocks, dir, jdelta, jdir, beta0, g, static_cast<int>(direction), k, sc, beta);
}

}  // namespace rh
