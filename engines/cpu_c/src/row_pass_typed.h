/* Type-generic body of row_pass.c, included once per dtype with RH_T (float or double) and
 * RH_NAME(x) (a suffixing macro) defined. Values are widened to double as they are read. */

/* Explicit lanes give one summation order on every instruction set and let the compiler
 * vectorise without reassociating. */
static inline double RH_NAME(row_dot)(const RH_T* x, const double* beta, int64_t m) {
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
  return ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) +
         ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7])) + tail;
}

/* One block of rows: loss always; gradient partial (P values, overwritten) and curvature when
 * requested. */
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
  for (int64_t i = first; i < last; ++i) {
    const RH_T* row = x + i * m;
    double r = (double)y[i] - (RH_NAME(row_dot)(row, beta, m) + intercept);
    double weight = w != NULL ? (double)w[i] : 1.0;
    total += weight * rh_huber_loss(r, tau);
    if (gradient != NULL) {
      double v = weight * rh_huber_score(r, tau);
      for (int64_t j = 0; j < m; ++j) {
        gradient[j] += v * (double)row[j];
      }
      intercept_gradient += v;
    }
    if (curvature != NULL) {
      curvature[i] = rh_smoothed_curvature(r, tau, h);
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
