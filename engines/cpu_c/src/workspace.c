#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "allocation.h"
#include "cpu_engine.h"
#include "gram_kernel.h"

/* Every buffer of the workspace with its element count, so sizing and release stay in one
 * table and cannot drift apart. */
typedef struct RhBufferSpec {
  void** slot;
  int64_t count;
  size_t elem_size;
} RhBufferSpec;

static int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

static size_t buffer_specs(RhWorkspace* ws, int64_t n, int64_t P, size_t elem_size,
                           RhBufferSpec* specs, int* overflow) {
  int64_t square = 0, row_blocks = ceil_div(n, RH_ROW_BLOCK), block_grad = 0;
  /* Gram: per super-block two packed chunks of RH_GRAM_DEPTH rows and one partial, both with
   * the parameters padded to whole panel groups (gram.c). */
  int64_t width = ceil_div(P, RH_PANEL_WIDTH) * RH_PANEL_WIDTH;
  int64_t superblocks = ceil_div(n, RH_GRAM_SUPERBLOCK), pack = 0, partial = 0;
  *overflow = rh_mul_i64(P, P, &square) || rh_mul_i64(row_blocks, P, &block_grad) ||
              rh_mul_i64(superblocks, 2 * (int64_t)RH_GRAM_DEPTH, &pack) ||
              rh_mul_i64(pack, width, &pack) || rh_mul_i64(width, width, &partial) ||
              rh_mul_i64(partial, superblocks, &partial) ||
              pack > INT64_MAX - RH_GRAM_ALIGN_SLACK || partial > INT64_MAX - RH_GRAM_ALIGN_SLACK;
  if (!*overflow) {
    pack += RH_GRAM_ALIGN_SLACK;
    partial += RH_GRAM_ALIGN_SLACK;
  }
  size_t k = 0;
#define RH_SPEC(field, cnt, size) specs[k++] = (RhBufferSpec){(void**)&ws->field, (cnt), (size)}
  RH_SPEC(curvature, n, sizeof(double));
  RH_SPEC(curvature_next, n, sizeof(double));
  RH_SPEC(row_scale, n, sizeof(double));
  RH_SPEC(row_list, n, sizeof(int64_t));
  RH_SPEC(block_gradient, block_grad, sizeof(double));
  RH_SPEC(block_loss, row_blocks, sizeof(double));
  RH_SPEC(gram_pack, pack, sizeof(double));
  RH_SPEC(gram_partial, partial, sizeof(double));
  RH_SPEC(meat_partial, partial, sizeof(double));
  RH_SPEC(beta0, P, sizeof(double));
  RH_SPEC(history, P, sizeof(double));
  RH_SPEC(mask, P, sizeof(double));
  RH_SPEC(beta, P, sizeof(double));
  RH_SPEC(candidate, P, sizeof(double));
  RH_SPEC(gradient, P, sizeof(double));
  RH_SPEC(gradient_next, P, sizeof(double));
  RH_SPEC(step, P, sizeof(double));
  RH_SPEC(scratch, P, sizeof(double));
  RH_SPEC(singular_values, P, sizeof(double));
  RH_SPEC(bound_terms, 6 * P, sizeof(double));
  RH_SPEC(information, square, sizeof(double));
  RH_SPEC(gram_weighted, square, sizeof(double));
  RH_SPEC(gram, square, sizeof(double));
  RH_SPEC(hessian, square, sizeof(double));
  RH_SPEC(factor, square, sizeof(double));
  RH_SPEC(right_vectors, square, sizeof(double));
  RH_SPEC(equilibrated, square, sizeof(double));
  RH_SPEC(equilibration, 3 * P, sizeof(double));
  RH_SPEC(batch_meat, square, sizeof(double));
  RH_SPEC(staged_coefficients, P, elem_size);
  RH_SPEC(staged_information, square, elem_size);
  RH_SPEC(staged_meat, square, sizeof(double));
#undef RH_SPEC
  return k;
}

#define RH_MAX_BUFFERS 40

void rh_workspace_release(RhWorkspace* ws) {
  RhBufferSpec specs[RH_MAX_BUFFERS];
  int overflow = 0;
  size_t count = buffer_specs(ws, 0, 0, 1, specs, &overflow);
  for (size_t i = 0; i < count; ++i) {
    rh_release(*specs[i].slot);
    *specs[i].slot = NULL;
  }
  ws->rows_capacity = 0;
  ws->params_capacity = 0;
  ws->gram_weighted_ready = 0;
}

RhCudaStatus rh_workspace_reserve(RhWorkspace* ws, int64_t n_rows, int64_t n_parameters,
                                  size_t elem_size, RhErrorBuffer* err) {
  ws->gram_weighted_ready = 0;
  if (n_rows <= ws->rows_capacity && n_parameters == ws->params_capacity) {
    return RH_CUDA_SUCCESS;
  }
  int64_t rows = n_rows > ws->rows_capacity ? n_rows : ws->rows_capacity;
  rh_workspace_release(ws);
  RhBufferSpec specs[RH_MAX_BUFFERS];
  int overflow = 0;
  size_t count = buffer_specs(ws, rows, n_parameters, elem_size, specs, &overflow);
  for (size_t i = 0; i < count && !overflow; ++i) {
    size_t bytes = 0;
    if (rh_bytes(specs[i].count, specs[i].elem_size, &bytes) != 0) {
      overflow = 1;
      break;
    }
    /* malloc(0) may return NULL; one element keeps the NULL check meaningful. */
    *specs[i].slot = rh_allocate(bytes > 0 ? bytes : specs[i].elem_size);
    if (*specs[i].slot == NULL) {
      rh_workspace_release(ws);
      return rh_fail(err, RH_CUDA_ALLOCATION_FAILED,
                     "workspace allocation of %zu bytes failed (n_rows %" PRId64
                     ", n_parameters %" PRId64 ")",
                     bytes, n_rows, n_parameters);
    }
  }
  if (overflow) {
    rh_workspace_release(ws);
    return rh_fail(err, RH_CUDA_ALLOCATION_FAILED,
                   "workspace size overflows for n_rows %" PRId64 " and n_parameters %" PRId64,
                   n_rows, n_parameters);
  }
  ws->rows_capacity = rows;
  ws->params_capacity = n_parameters;
  return RH_CUDA_SUCCESS;
}
