// Runs one repeated piece of stream work (a solver iteration) as a CUDA Graph when the engine
// has CUDA_GRAPHS. The first run in an update captures the work; the engine keeps one executable
// graph per slot across updates and brings it up to date with cudaGraphExecUpdate (new batch
// pointers, new constants) instead of instantiating again, which it only does when the captured
// topology changed (another batch shape). Every launch argument that changes between iterations
// lives in device memory, so one capture serves every iteration of the update. A capture that
// fails is counted and the work runs eagerly for the rest of the update.
#pragma once

#include <cuda_runtime.h>

#include "engine.hpp"
#include "engine_error.hpp"

namespace rh {

class GraphReplayer {
 public:
  GraphReplayer(Engine& e, GraphSlot slot) : e_(e), slot_(slot) {}
  GraphReplayer(const GraphReplayer&) = delete;
  GraphReplayer& operator=(const GraphReplayer&) = delete;

  template <class Enqueue>
  void run(Enqueue&& enqueue) {
    if (!e_.graphs_enabled() || abandoned_) {
      enqueue();
      return;
    }
    if (!ready_ && !capture(enqueue)) {
      abandoned_ = true;
      e_.graphs.fallbacks += 1;
      enqueue();
      return;
    }
    ready_ = true;
    check_cuda(cudaGraphLaunch(e_.graph_cache[slot_], e_.stream), "cudaGraphLaunch");
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
      enqueued = false;  // the eager retry reports it
    } catch (...) {
      // Anything else (std::bad_alloc) propagates, but never with the stream left capturing.
      cudaGraph_t partial = nullptr;
      (void)cudaStreamEndCapture(e_.stream, &partial);
      if (partial != nullptr)
        cudaGraphDestroy(partial);
      (void)cudaGetLastError();
      throw;
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(e_.stream, &graph);
    const bool captured = enqueued && ended == cudaSuccess && graph != nullptr;
    if (captured)
      e_.graphs.captures += 1;
    const bool ok = captured && install(graph);
    if (graph != nullptr)
      cudaGraphDestroy(graph);  // an executable graph does not need it
    if (!ok)
      (void)cudaGetLastError();
    return ok;
  }

  // Makes the engine's executable graph for this slot run `graph`: an in-place update when the
  // topology matches, a fresh instantiation otherwise.
  bool install(cudaGraph_t graph) {
    cudaGraphExec_t& exec = e_.graph_cache[slot_];
    if (exec != nullptr) {
      cudaGraphExecUpdateResultInfo info{};
      if (cudaGraphExecUpdate(exec, graph, &info) == cudaSuccess)
        return true;
      (void)cudaGetLastError();
      (void)cudaGraphExecDestroy(exec);
      exec = nullptr;
    }
    if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
      exec = nullptr;
      return false;
    }
    return true;
  }

  Engine& e_;
  GraphSlot slot_;
  bool ready_ = false;
  bool abandoned_ = false;
};

}  // namespace rh
