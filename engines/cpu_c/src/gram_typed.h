/* Type-generic packing of gram.c, included once per dtype with RH_T and RH_NAME(x) defined. */

/* Listed rows [0, count) of one chunk into the two panels (layout of gram_kernel.h, stride
 * RH_GRAM_DEPTH): `plain` gets the design values widened to double with the virtual intercept
 * column and zero padding, `scaled` the same values times scale[k]. */
RH_MULTIVERSION static void RH_NAME(pack_chunk)(const RhBatchData* d, const int64_t* rows,
                                                const double* scale, int64_t count, int64_t groups,
                                                double* scaled, double* plain) {
  const RH_T* x = (const RH_T*)d->x;
  const int64_t m = d->n_columns;
  const int64_t complete = m / RH_PANEL_WIDTH;
  const int64_t group_size = (int64_t)RH_GRAM_DEPTH * RH_PANEL_WIDTH;
  for (int64_t k = 0; k < count; ++k) {
    const RH_T* row = x + rows[k] * m;
    const double s = scale[k];
    double* p = plain + k * RH_PANEL_WIDTH;
    double* q = scaled + k * RH_PANEL_WIDTH;
    for (int64_t g = 0; g < complete; ++g) {
      for (int l = 0; l < RH_PANEL_WIDTH; ++l) {
        double v = (double)row[g * RH_PANEL_WIDTH + l];
        p[g * group_size + l] = v;
        q[g * group_size + l] = v * s;
      }
    }
    for (int64_t g = complete; g < groups; ++g) {
      for (int l = 0; l < RH_PANEL_WIDTH; ++l) {
        int64_t col = g * RH_PANEL_WIDTH + l;
        double v = col < m ? (double)row[col] : (col == m && d->append_intercept ? 1.0 : 0.0);
        p[g * group_size + l] = v;
        q[g * group_size + l] = v * s;
      }
    }
  }
}

/* A chunk of at most RH_MEAT_DEPTH rows packed for rh_gram_and_meat in one read of its rows:
 * `plain` and `meat_scaled` hold every listed row (the latter times w psi(r)^2, r = y - x' beta
 * computed here from the widened row), `gram_plain` and `gram_scaled` only the rows whose
 * scale[k] is not zero, compacted, so the Gram's product runs over those rows alone. Returns
 * their count. */
RH_MULTIVERSION static int64_t RH_NAME(pack_chunk_with_meat)(
    const RhBatchData* d, const int64_t* rows, const double* scale, const double* beta, double tau,
    int64_t count, int64_t groups, RhMeatPanels panels) {
  const RH_T* x = (const RH_T*)d->x;
  const RH_T* y = (const RH_T*)d->y;
  const RH_T* weights = (const RH_T*)d->weights;
  const int64_t m = d->n_columns;
  const int64_t P = d->n_parameters;
  const int64_t group_size = (int64_t)RH_MEAT_DEPTH * RH_PANEL_WIDTH;
  int64_t kept = 0;
  for (int64_t k = 0; k < count; ++k) {
    const int64_t i = rows[k];
    const RH_T* row = x + i * m;
    double* p = panels.plain + k * RH_PANEL_WIDTH;
    double fit = 0.0;
    for (int64_t g = 0; g < groups; ++g) {
      for (int l = 0; l < RH_PANEL_WIDTH; ++l) {
        int64_t col = g * RH_PANEL_WIDTH + l;
        double v = col < m ? (double)row[col] : (col == m && d->append_intercept ? 1.0 : 0.0);
        p[g * group_size + l] = v;
        if (col < P) {
          fit += v * beta[col];
        }
      }
    }
    const double r = (double)y[i] - fit;
    const double psi = r > tau ? tau : (r < -tau ? -tau : r);
    const double w = weights == NULL ? 1.0 : (double)weights[i];
    const double t = w * psi * psi, s = scale[k];
    double* u = panels.meat_scaled + k * RH_PANEL_WIDTH;
    double* gp = panels.gram_plain + kept * RH_PANEL_WIDTH;
    double* gq = panels.gram_scaled + kept * RH_PANEL_WIDTH;
    for (int64_t g = 0; g < groups; ++g) {
      for (int l = 0; l < RH_PANEL_WIDTH; ++l) {
        double v = p[g * group_size + l];
        u[g * group_size + l] = v * t;
        gp[g * group_size + l] = v;
        gq[g * group_size + l] = v * s;
      }
    }
    kept += s != 0.0;
  }
  return kept;
}
