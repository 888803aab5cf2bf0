// Runs one repeated piece of stream work (a solver iteration) as a CUDA Graph when the engine
// has CUDA_GRAPHS: captured on first use within an update, replayed afterwards. Every launch
// argument lives in device memory, so one capture serves every iteration. A capture that fails
// is counted and the work runs eagerly for the rest of the update.
#pragma once

#include <cuda_runtime.h>

#include "engine.hpp"
#include "engine_error.hpp"

namespace rh {

class GraphReplayer {
 public:
  explicit GraphReplayer(Engine& e) : e_(e) {}
  GraphReplayer(const GraphReplayer&) = delete;
  GraphReplayer& operator=(const GraphReplayer&) = delete;
  ~GraphReplayer() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
  }

  template <class Enqueue>
  void run(Enqueue&& enqueue) {
    if (!e_.graphs_enabled() || abandoned_) {
      enqueue();
      return;
    }
    if (exec_ == nullptr && !capture(enqueue)) {
      abandoned_ = true;
      e_.graphs.fallbacks += 1;
      enqueue();
      return;
    }
    check_cuda(cudaGraphLaunch(exec_, e_.stream), "cudaGraphLaunch");
    e_.graphs.replays += 1;
  }

 private:
  template <class Enqueue>
  bool capture(Enqueue& enqueue) {
    if (cudaStreamBeginCapture(e_.stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    bool enqueued = true;
    try {
      enqueue();
    } catch (const EngineError&) {
      enqueued = false;
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(e_.stream, &graph);
    if (!enqueued || ended != cudaSuccess || graph == nullptr) {
      if (graph != nullptr) cudaGraphDestroy(graph);
      (void)cudaGetLastError();
      return false;
    }
    if (cudaGraphInstantiate(&exec_, graph, 0) != cudaSuccess) {
      cudaGraphDestroy(graph);
      exec_ = nullptr;
      (void)cudaGetLastError();
      return false;
    }
    graph_ = graph;
    e_.graphs.captures += 1;
    return true;
  }

  Engine& e_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  bool abandoned_ = false;
};

}  // namespace rh
