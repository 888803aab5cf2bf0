/* Type-generic body of row_pass.c, included once per dtype with RH_T (float or double) and
 * RH_NAME(x) (a suffixing macro) defined. Values are widened to double as they are read. */

/* x . beta for RH_ROWS_AT_ONCE rows of stride m at once: independent accumulators hide the
 * FMA latency. Each row's sum is the 8-lane sum of rh_lane_dot's order, so grouping rows never
 * changes a result. */
static inline void RH_NAME(rows_dot)(const RH_T* x, int64_t m, const double* beta,
                                     double out[RH_ROWS_AT_ONCE]) {
  RhVec8 acc[RH_ROWS_AT_ONCE];
  for (int q = 0; q < RH_ROWS_AT_ONCE; ++q) {
    acc[q] = rh_vec8_zero();
  }
  int64_t j = 0;
  for (; j + 8 <= m; j += 8) {
    RhVec8 b = rh_vec8_load(beta + j);
    for (int q = 0; q < RH_ROWS_AT_ONCE; ++q) {
      acc[q] = rh_vec8_fma(RH_LOAD8(x + q * m + j), b, acc[q]);
    }
  }
  for (int q = 0; q < RH_ROWS_AT_ONCE; ++q) {
    double tail = 0.0;
    for (int64_t t = j; t < m; ++t) {
      tail += (double)x[q * m + t] * beta[t];
    }
    out[q] = rh_vec8_sum(acc[q]) + tail;
  }
}

static inline double RH_NAME(row_dot)(const RH_T* x, const double* beta, int64_t m) {
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
}

/* gradient[0..m) += sum_q v[q] x_q, adding the rows in order for every column: the same
 * sequence of additions as one row at a time. */
static inline void RH_NAME(rows_axpy)(const RH_T* x, int64_t m, int count, const double* v,
                                      double* gradient) {
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
}

/* One block of rows: loss always; gradient partial (P values, overwritten) and curvature when
 * requested. Rows go RH_ROWS_AT_ONCE at a time so they are still in L1 for the gradient. */
RH_MULTIVERSION static void RH_NAME(row_block)(const RhProblem* problem, const double* beta,
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
  double total = 0.0, intercept_gradient = 0.0;
  if (gradient != NULL) {
    for (int64_t j = 0; j < m; ++j) {
      gradient[j] = 0.0;
    }
  }
  for (int64_t i = first; i < last; i += RH_ROWS_AT_ONCE) {
    const int count = last - i < RH_ROWS_AT_ONCE ? (int)(last - i) : RH_ROWS_AT_ONCE;
    const RH_T* rows = x + i * m;
    double dots[RH_ROWS_AT_ONCE], scores[RH_ROWS_AT_ONCE];
    if (count == RH_ROWS_AT_ONCE) {
      RH_NAME(rows_dot)(rows, m, beta, dots);
    } else {
      for (int q = 0; q < count; ++q) {
        dots[q] = RH_NAME(row_dot)(rows + q * m, beta, m);
      }
    }
    for (int q = 0; q < count; ++q) {
      double r = (double)y[i + q] - (dots[q] + intercept);
      double weight = w != NULL ? (double)w[i + q] : 1.0;
      total += weight * rh_huber_loss(r, tau);
      scores[q] = weight * rh_huber_score(r, tau);
      intercept_gradient += scores[q];
      if (curvature != NULL) {
        curvature[i + q] = rh_smoothed_curvature(r, tau, h);
      }
    }
    if (gradient != NULL) {
      RH_NAME(rows_axpy)(rows, m, count, scores, gradient);
    }
  }
  if (gradient != NULL && d->append_intercept) {
    gradient[m] = intercept_gradient;
  }
  *loss = total;
}

RH_MULTIVERSION static void RH_NAME(predict_block)(const RH_T* x, int64_t first, int64_t last,
                                                   int64_t m, double intercept,
                                                   const double* beta, RH_T* out) {
  for (int64_t i = first; i < last; ++i) {
    out[i] = (RH_T)(RH_NAME(row_dot)(x + i * m, beta, m) + intercept);
  }
}
