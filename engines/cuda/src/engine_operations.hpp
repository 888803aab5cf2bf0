// The operations behind the exported functions, each validating its arguments first and
// leaving the committed state untouched unless it returns normally.
#pragma once

#include "engine.hpp"
#include "rh_cuda_row_statistics.h"

namespace rh {

enum class BatchLocation { Host, Device };

// batch: an RhCudaHostBatch or RhCudaDeviceBatch (same layout). state may be NULL.
void run_update(Engine& e, const RhCudaHostBatch* batch, BatchLocation location,
                const RhCudaUpdateConfig* config, RhCudaDiagnostics* diagnostics,
                RhCudaHostState* state);
void restore_state(Engine& e, const RhCudaHostStateView* view);
void copy_state(Engine& e, RhCudaHostState* out);
void predict(Engine& e, const RhCudaPrediction* request);
// The row-statistics extension (row_statistics.cu): batch an RhCudaHostBatch or
// RhCudaDeviceBatch (same layout).
void row_statistics(Engine& e, const RhCudaHostBatch* batch, BatchLocation location,
                    RhCudaRowStatistics* statistics);

}  // namespace rh
