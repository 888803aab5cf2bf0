/* Type-generic body of gram.c, included once per dtype with RH_T and RH_NAME(x) defined. */

/* Eight design values of one row starting at column `first`, with the virtual intercept
 * column (index n_columns when appended) and zero padding past P. */
static inline void RH_NAME(pack_columns)(const RH_T* row, int64_t n_columns, int append,
                                         int64_t first, double out[RH_GRAM_TILE]) {
  if (first + RH_GRAM_TILE <= n_columns) {
    for (int c = 0; c < RH_GRAM_TILE; ++c) {
      out[c] = (double)row[first + c];
    }
    return;
  }
  for (int c = 0; c < RH_GRAM_TILE; ++c) {
    int64_t col = first + c;
    out[c] = col < n_columns ? (double)row[col] : (col == n_columns && append ? 1.0 : 0.0);
  }
}

#define RH_GRAM_CHUNK 32

/* out (8 x 8) = sum over listed rows k in [first, last) of scale[k] * x[J..J+8) x[K..K+8)',
 * accumulated in list order. */
RH_MULTIVERSION static void RH_NAME(gram_tile)(const RhBatchData* d, const int64_t* rows,
                                               const double* scale, int64_t first, int64_t last,
                                               int64_t J, int64_t K, double* out) {
  const RH_T* x = (const RH_T*)d->x;
  const int64_t m = d->n_columns;
  double acc[RH_GRAM_TILE][RH_GRAM_TILE];
  double left[RH_GRAM_CHUNK][RH_GRAM_TILE];
  double right[RH_GRAM_CHUNK][RH_GRAM_TILE];
  for (int a = 0; a < RH_GRAM_TILE; ++a) {
    for (int b = 0; b < RH_GRAM_TILE; ++b) {
      acc[a][b] = 0.0;
    }
  }
  for (int64_t k = first; k < last; k += RH_GRAM_CHUNK) {
    int count = last - k < RH_GRAM_CHUNK ? (int)(last - k) : RH_GRAM_CHUNK;
    for (int r = 0; r < count; ++r) {
      const RH_T* row = x + rows[k + r] * m;
      RH_NAME(pack_columns)(row, m, d->append_intercept, J, left[r]);
      RH_NAME(pack_columns)(row, m, d->append_intercept, K, right[r]);
      for (int a = 0; a < RH_GRAM_TILE; ++a) {
        left[r][a] *= scale[k + r];
      }
    }
    for (int r = 0; r < count; ++r) {
      for (int a = 0; a < RH_GRAM_TILE; ++a) {
        for (int b = 0; b < RH_GRAM_TILE; ++b) {
          acc[a][b] += left[r][a] * right[r][b];
        }
      }
    }
  }
  for (int a = 0; a < RH_GRAM_TILE; ++a) {
    for (int b = 0; b < RH_GRAM_TILE; ++b) {
      out[a * RH_GRAM_TILE + b] = acc[a][b];
    }
  }
}
