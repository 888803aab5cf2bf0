/* Type-generic body of row_pass.c, included once per dtype with RH_T (float or double) and
 * RH_NAME(x) (a suffixing macro) defined. Values are widened to double as they are read. */

static inline double RH_NAME(row_dot)(const RH_T* x, const double* beta, int64_t m) {
#if RH_HAVE_VECTORS
  RhVec8 acc = rh_vec8_zero();
  int64_t j = 0;
  for (; j + 8 <= m; j += 8) {
    acc = rh_vec8_fma(RH_LOAD8(x + j), rh_vec8_load(beta + j), acc);
  }
  double tail = 0.0;
  for (; j < m; ++j) {
    tail += (double)x[j] * beta[j];
  }
  return rh_vec8_sum(acc) + tail;
#else
  /* A plain lane array, which compilers vectorise; same order as the vector path. */
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= m; j += 8) {
    for (int l = 0; l < 8; ++l) {
      lanes[l] += (double)x[j + l] * beta[j + l];
    }
  }
  double tail = 0.0;
  for (; j < m; ++j) {
    tail += (double)x[j] * beta[j];
  }
  return (((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) +
          ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]))) +
         tail;
#endif
}

/* x . beta for 8 rows of stride m at once: independent accumulators hide the FMA latency, and
 * each row's sum is rh_vec8_sum's order, so grouping rows never changes a result. */
static inline void RH_NAME(eight_dots)(const RH_T* x, int64_t m, const double* beta,
                                       double out[8]) {
#if !RH_HAVE_VECTORS
  /* Scalar lanes: eight rows of accumulators would not fit in registers. */
  for (int q = 0; q < 8; ++q) {
    out[q] = RH_NAME(row_dot)(x + q * m, beta, m);
  }
#else
  RhVec8 acc[8];
  for (int q = 0; q < 8; ++q) {
    acc[q] = rh_vec8_zero();
  }
  int64_t j = 0;
  for (; j + 8 <= m; j += 8) {
    RhVec8 b = rh_vec8_load(beta + j);
    for (int q = 0; q < 8; ++q) {
      acc[q] = rh_vec8_fma(RH_LOAD8(x + q * m + j), b, acc[q]);
    }
  }
  RhVec8 sums;
  RH_VEC8_SUM_EACH(acc, sums);
  rh_vec8_store(out, sums);
  for (int q = 0; q < 8; ++q) {
    double tail = 0.0;
    for (int64_t t = j; t < m; ++t) {
      tail += (double)x[q * m + t] * beta[t];
    }
    out[q] += tail;
  }
#endif
}

/* gradient[0..m) += sum_q v[q] x_q, adding the rows in order for every column: the same
 * sequence of additions as one row at a time. */
static inline void RH_NAME(rows_axpy)(const RH_T* x, int64_t m, int count, const double* v,
                                      double* gradient) {
#if RH_HAVE_VECTORS
  int64_t j = 0;
  for (; j + 8 <= m; j += 8) {
    RhVec8 g = rh_vec8_load(gradient + j);
    for (int q = 0; q < count; ++q) {
      g = rh_vec8_fma(RH_LOAD8(x + q * m + j), rh_vec8_splat(v[q]), g);
    }
    rh_vec8_store(gradient + j, g);
  }
  for (; j < m; ++j) {
    double g = gradient[j];
    for (int q = 0; q < count; ++q) {
      g += v[q] * (double)x[q * m + j];
    }
    gradient[j] = g;
  }
#else
  for (int q = 0; q < count; ++q) {
    for (int64_t j = 0; j < m; ++j) {
      gradient[j] += v[q] * (double)x[q * m + j];
    }
  }
#endif
}

/* Residuals y - (x . beta + intercept) and weights of eight consecutive rows. */
static inline void RH_NAME(eight_residuals)(const RH_T* y, const RH_T* w, const double* dots,
                                            double intercept, double* r, double* weight) {
#if RH_HAVE_VECTORS
  rh_vec8_store(r, RH_LOAD8(y) - (rh_vec8_load(dots) + intercept));
  rh_vec8_store(weight, w != NULL ? RH_LOAD8(w) : rh_vec8_splat(1.0));
#else
  for (int q = 0; q < 8; ++q) {
    r[q] = (double)y[q] - (dots[q] + intercept);
    weight[q] = w != NULL ? (double)w[q] : 1.0;
  }
#endif
}

/* Hints the next rows into cache, one request per cache line. */
static inline void RH_NAME(prefetch_rows)(const RH_T* p, int64_t count) {
  const char* bytes = (const char*)p;
  for (int64_t k = 0; k < count * (int64_t)sizeof(RH_T); k += 64) {
    __builtin_prefetch(bytes + k);
  }
}

/* One block of rows: loss always; gradient partial (P values, overwritten) and curvature when
 * requested. Rows go eight at a time: their dots, the Huber pieces of the eight on one vector,
 * then the gradient while the rows are still in L1. */
RH_KERNEL_ATTRIBUTES void RH_NAME(row_block)(const RhProblem* problem, const double* beta,
                                             int64_t first, int64_t last, double* loss,
                                             double* gradient, double* curvature) {
  const RhBatchData* d = &problem->data;
  const RH_T* x = (const RH_T*)d->x;
  const RH_T* y = (const RH_T*)d->y;
  const RH_T* w = (const RH_T*)d->weights;
  const int64_t m = d->n_columns;
  const double intercept = d->append_intercept ? beta[m] : 0.0;
  const double tau = problem->tau;
  const double h = problem->bandwidth;
  const double slope = rh_curvature_slope(h);
  /* Narrow rows defeat the hardware prefetcher (measured on the streaming shape); wide rows
   * are long sequential runs it follows, and hinting them only evicts L1. */
  const int prefetch = m * (int64_t)sizeof(RH_T) <= 512;
  /* Per-lane running sums, added pairwise at the end: a fixed order for a fixed block. */
  RhVec8 lane_loss = rh_vec8_zero(), lane_score = rh_vec8_zero();
  if (gradient != NULL) {
    for (int64_t j = 0; j < m; ++j) {
      gradient[j] = 0.0;
    }
  }
  int64_t i = first;
  for (; i + 8 <= last; i += 8) {
    const RH_T* rows = x + i * m;
    double dots[8], r[8], weight[8], scores[8], c[8];
    if (prefetch && i + 24 <= last) {
      RH_NAME(prefetch_rows)(x + (i + 16) * m, 8 * m);
    }
    RH_NAME(eight_dots)(rows, m, beta, dots);
    RH_NAME(eight_residuals)(y + i, w != NULL ? w + i : NULL, dots, intercept, r, weight);
    rh_eight_pieces(r, weight, tau, h, slope, &lane_loss, &lane_score, scores,
                    curvature != NULL ? curvature + i : c);
    if (gradient != NULL) {
      RH_NAME(rows_axpy)(rows, m, 8, scores, gradient);
    }
  }
  if (i < last) {
    /* The last rows of the block, padded to eight with weight 0 and a zero residual so the
     * padding adds exact zeros. */
    const int count = (int)(last - i);
    const RH_T* rows = x + i * m;
    double r[8], weight[8], scores[8], c[8];
    for (int q = 0; q < 8; ++q) {
      int live = q < count;
      r[q] = live ? (double)y[i + q] - (RH_NAME(row_dot)(rows + q * m, beta, m) + intercept) : 0.0;
      weight[q] = !live ? 0.0 : (w != NULL ? (double)w[i + q] : 1.0);
    }
    rh_eight_pieces(r, weight, tau, h, slope, &lane_loss, &lane_score, scores, c);
    if (curvature != NULL) {
      for (int q = 0; q < count; ++q) {
        curvature[i + q] = c[q];
      }
    }
    if (gradient != NULL) {
      RH_NAME(rows_axpy)(rows, m, count, scores, gradient);
    }
  }
  if (gradient != NULL && d->append_intercept) {
    gradient[m] = rh_vec8_sum(lane_score);
  }
  *loss = rh_vec8_sum(lane_loss);
}

RH_KERNEL_ATTRIBUTES void RH_NAME(predict_block)(const RH_T* x, int64_t first, int64_t last,
                                                 int64_t m, double intercept, const double* beta,
                                                 RH_T* out) {
  for (int64_t i = first; i < last; ++i) {
    out[i] = (RH_T)(RH_NAME(row_dot)(x + i * m, beta, m) + intercept);
  }
}
