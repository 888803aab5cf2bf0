// Everything one update works with, and the pieces both solvers queue: the row pass (residual,
// score, objective, X'u and optionally the weighted Gram), the gradient, and the status readback
// that is the only host synchronisation inside an iteration.
#pragma once

#include "engine.hpp"
#include "solver_types.hpp"

namespace rh {

template <class T>
struct UpdateContext {
  Engine& e;
  RowView<T> rows;
  BatchConstants k;
  int64_t max_iter;
  const char* batch_name;
  bool information_symmetric;
  bool used_svd = false;
  bool data_checked = false;

  DeviceScalars* device_scalars() const { return e.ws.scalars.as<DeviceScalars>(); }
  const DeviceScalars& status() const { return e.ws.host_scalars.as<DeviceScalars>()[1]; }
  double* beta() const { return e.ws.beta.as<double>(); }
  double* beta0() const { return e.ws.beta0.as<double>(); }
  double* grad() const { return e.ws.grad.as<double>(); }
  double* jdelta() const { return e.ws.jdelta.as<double>(); }
  double* information64() const { return e.ws.information64.as<double>(); }
  T* gram() const { return e.ws.gram.as<T>(); }
  T* xtu() const { return e.ws.xtu.as<T>(); }

  // Residual, score and objective partials at the current beta, then X'u; with_gram also forms
  // X' diag(w c) X at this beta (the Newton Hessian, and the information increment at the end).
  void row_pass(bool with_gram, bool set_objective, bool skip_when_done);
  void gradient(bool skip_when_done);
  void enqueue_readback();
  // Waits for the stream and, on the first call, refuses the batch if its data were bad.
  void wait_for_status();
};

}  // namespace rh
