/* The optional row-statistics extension (abi/rh_cuda_row_statistics.h): every sum against a
 * plain loop written here from the formulas of docs/algorithm.md (not from the engine's code),
 * for float64 and float32 data, with and without weights; every refusal with its message; the
 * outputs untouched by a failed call and the committed state untouched by any call; version 2's
 * device-row entry point refused as UNAVAILABLE (the CPU engine reads host memory only). */
#include <stddef.h>

#include "rh_cuda_row_statistics.h"
#include "test_support.h"

#define NF 4
#define NP 5    /* the design carries the intercept column (ones) last */
#define NR 2600 /* several row blocks and Gram super-blocks */

static double XD[NR * NP], YD[NR], WD[NR];
static float XF[NR * NP], YF[NR], WF[NR];
static const double BETA[NP] = {0.5, -1.0, 0.25, 2.0, 0.3};
static const float BETA_F[NP] = {0.5f, -1.0f, 0.25f, 2.0f, 0.3f};

typedef struct Expected {
  double loss, norm, score[NP], curvature[NP * NP], majoriser[NP * NP], meat[NP * NP];
} Expected;

static double clip(double v, double lo, double hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

/* The sums from their definitions, in double, from the values as stored (float32 widened). */
static void expected_sums(int f32, int weighted, double tau, double h, Expected* e) {
  memset(e, 0, sizeof *e);
  for (int64_t i = 0; i < NR; ++i) {
    double x[NP], fitted = 0.0, norm = 0.0;
    for (int j = 0; j < NP; ++j) {
      x[j] = f32 ? (double)XF[i * NP + j] : XD[i * NP + j];
      fitted += x[j] * (f32 ? (double)BETA_F[j] : BETA[j]);
      norm += x[j] * x[j];
    }
    const double w = !weighted ? 1.0 : (f32 ? (double)WF[i] : WD[i]);
    const double r = (f32 ? (double)YF[i] : YD[i]) - fitted;
    const double psi = clip(r, -tau, tau);
    const double rho = fabs(r) <= tau ? 0.5 * r * r : tau * fabs(r) - 0.5 * tau * tau;
    const double c = clip(0.5 + (tau - fabs(r)) / (2.0 * h), 0.0, 1.0);
    const double quad = r == 0.0 ? 1.0 : (tau / fabs(r) < 1.0 ? tau / fabs(r) : 1.0);
    const double m = c > quad ? c : quad;
    e->loss += w * rho;
    e->norm += w * norm;
    for (int j = 0; j < NP; ++j) {
      e->score[j] += w * psi * x[j];
      for (int k = 0; k < NP; ++k) {
        e->curvature[j * NP + k] += w * c * x[j] * x[k];
        e->majoriser[j * NP + k] += w * m * x[j] * x[k];
        e->meat[j * NP + k] += w * psi * psi * x[j] * x[k];
      }
    }
  }
}

static void make_data(void) {
  for (int64_t i = 0; i < NR; ++i) {
    double fitted = BETA[NP - 1];
    for (int j = 0; j < NF; ++j) {
      XD[i * NP + j] = rh_normal();
      fitted += XD[i * NP + j] * BETA[j];
    }
    XD[i * NP + NF] = 1.0;
    /* Residuals on every piece of the curvature: inside, on the ramps, beyond. */
    YD[i] = fitted + 1.5 * rh_normal() + (i % 13 == 0 ? 9.0 * rh_normal() : 0.0);
    WD[i] = i % 7 == 0 ? 0.0 : 2.0 * rh_uniform();
    for (int j = 0; j < NP; ++j) {
      XF[i * NP + j] = (float)XD[i * NP + j];
    }
    YF[i] = (float)YD[i];
    WF[i] = (float)WD[i];
  }
}

static double weight_sum(int f32) {
  double s = 0.0;
  for (int64_t i = 0; i < NR; ++i) {
    s += f32 ? (double)WF[i] : WD[i];
  }
  return s;
}

typedef struct Outputs {
  double score[NP], curvature[NP * NP], majoriser[NP * NP], meat[NP * NP];
} Outputs;

static RhCudaRowStatistics request(uint64_t bits, const void* beta, Outputs* out) {
  RhCudaRowStatistics s;
  memset(&s, 0, sizeof s);
  s.abi_version = RH_CUDA_ABI_VERSION;
  s.struct_size = sizeof s;
  s.statistics = bits;
  s.coefficients = beta;
  s.tau = 1.345;
  s.bandwidth = 0.4;
  s.score = bits & RH_CUDA_STATISTIC_SCORE ? out->score : NULL;
  s.curvature_gram = bits & RH_CUDA_STATISTIC_CURVATURE ? out->curvature : NULL;
  s.majoriser_gram = bits & RH_CUDA_STATISTIC_MAJORISER ? out->majoriser : NULL;
  s.meat = bits & RH_CUDA_STATISTIC_MEAT ? out->meat : NULL;
  return s;
}

static RhCudaEngine* new_engine(int32_t dtype) {
  RhCudaEngineOptions o = rh_options(dtype, NP);
  RhCudaEngine* engine = NULL;
  CHECK_STATUS(rh_cuda_engine_create(&o, &engine), RH_CUDA_SUCCESS);
  return engine;
}

static void check_all(int f32, int weighted, uint64_t bits) {
  RhCudaEngine* engine = new_engine(f32 ? RH_CUDA_DTYPE_FLOAT32 : RH_CUDA_DTYPE_FLOAT64);
  Outputs out;
  memset(&out, 0, sizeof out);
  RhCudaRowStatistics s = request(bits, f32 ? (const void*)BETA_F : (const void*)BETA, &out);
  const void* w = !weighted ? NULL : (f32 ? (const void*)WF : (const void*)WD);
  RhCudaHostBatch b =
      rh_batch(f32 ? (const void*)XF : (const void*)XD, f32 ? (const void*)YF : (const void*)YD, w,
               NR, NP, weighted ? weight_sum(f32) : (double)NR);
  CHECK_STATUS(rh_cuda_engine_row_statistics(engine, &b, &s), RH_CUDA_SUCCESS);
  Expected e;
  expected_sums(f32, weighted, s.tau, s.bandwidth, &e);
  const double rtol = 1e-12;
  if (bits & RH_CUDA_STATISTIC_LOSS)
    CHECK_CLOSE(s.loss, e.loss, rtol, 0.0);
  if (bits & RH_CUDA_STATISTIC_NORM)
    CHECK_CLOSE(s.weighted_norm, e.norm, rtol, 0.0);
  for (int j = 0; j < NP; ++j) {
    if (bits & RH_CUDA_STATISTIC_SCORE)
      CHECK_CLOSE(out.score[j], e.score[j], rtol, 1e-9);
    for (int k = 0; k < NP; ++k) {
      const int q = j * NP + k;
      if (bits & RH_CUDA_STATISTIC_CURVATURE) {
        CHECK_CLOSE(out.curvature[q], e.curvature[q], rtol, 1e-9);
        CHECK(out.curvature[q] == out.curvature[k * NP + j]);
      }
      if (bits & RH_CUDA_STATISTIC_MAJORISER) {
        CHECK_CLOSE(out.majoriser[q], e.majoriser[q], rtol, 1e-9);
        CHECK(out.majoriser[q] == out.majoriser[k * NP + j]);
      }
      if (bits & RH_CUDA_STATISTIC_MEAT) {
        CHECK_CLOSE(out.meat[q], e.meat[q], rtol, 1e-9);
        CHECK(out.meat[q] == out.meat[k * NP + j]);
      }
    }
  }
  rh_cuda_engine_destroy(engine);
}

static void test_sums_match_their_definitions(void) {
  for (int f32 = 0; f32 <= 1; ++f32) {
    for (int weighted = 0; weighted <= 1; ++weighted) {
      check_all(f32, weighted, RH_CUDA_STATISTIC_ALL);
    }
  }
  /* Each statistic alone, and the meat without the curvature Gram (its own path). */
  const uint64_t single[] = {RH_CUDA_STATISTIC_LOSS,      RH_CUDA_STATISTIC_SCORE,
                             RH_CUDA_STATISTIC_CURVATURE, RH_CUDA_STATISTIC_MAJORISER,
                             RH_CUDA_STATISTIC_MEAT,      RH_CUDA_STATISTIC_NORM};
  for (size_t i = 0; i < sizeof single / sizeof single[0]; ++i) {
    check_all(0, 1, single[i]);
  }
}

static void test_version_and_untouched_state(void) {
  CHECK(rh_cuda_row_statistics_version() == RH_CUDA_ROW_STATISTICS_VERSION);
  RhCudaEngine* engine = new_engine(RH_CUDA_DTYPE_FLOAT64);
  double c0[NP], i0[NP * NP], c1[NP], i1[NP * NP];
  RhCudaHostState st = rh_state_out(c0, i0);
  CHECK_STATUS(rh_cuda_engine_copy_state(engine, &st), RH_CUDA_SUCCESS);
  Outputs out;
  RhCudaRowStatistics s = request(RH_CUDA_STATISTIC_ALL, BETA, &out);
  RhCudaHostBatch b = rh_batch(XD, YD, NULL, NR, NP, NR);
  CHECK_STATUS(rh_cuda_engine_row_statistics(engine, &b, &s), RH_CUDA_SUCCESS);
  RhCudaHostState after = rh_state_out(c1, i1);
  CHECK_STATUS(rh_cuda_engine_copy_state(engine, &after), RH_CUDA_SUCCESS);
  CHECK(memcmp(c0, c1, sizeof c0) == 0 && memcmp(i0, i1, sizeof i0) == 0);
  CHECK(after.n_samples_seen == 0 && after.batch_count == 0 && after.weight_sum == 0.0);
  /* NORM alone needs no coefficients; a batch of zero total weight has zero sums. */
  RhCudaRowStatistics norm = request(RH_CUDA_STATISTIC_NORM, NULL, &out);
  CHECK_STATUS(rh_cuda_engine_row_statistics(engine, &b, &norm), RH_CUDA_SUCCESS);
  CHECK(norm.weighted_norm > 0.0);
  static double zeros[NR];
  RhCudaHostBatch zero = rh_batch(XD, YD, zeros, NR, NP, 0.0);
  s = request(RH_CUDA_STATISTIC_ALL, BETA, &out);
  CHECK_STATUS(rh_cuda_engine_row_statistics(engine, &zero, &s), RH_CUDA_SUCCESS);
  CHECK(s.loss == 0.0 && s.weighted_norm == 0.0 && out.score[0] == 0.0 && out.meat[0] == 0.0);
  rh_cuda_engine_destroy(engine);
}

/* One refusal: INVALID_ARGUMENT, the message names `needle`, no output written. */
static void refused(RhCudaEngine* engine, const RhCudaHostBatch* b, RhCudaRowStatistics s,
                    const char* needle, int line) {
  Outputs out;
  memset(&out, 0x5a, sizeof out);
  if (s.score)
    s.score = out.score;
  if (s.curvature_gram)
    s.curvature_gram = out.curvature;
  if (s.majoriser_gram)
    s.majoriser_gram = out.majoriser;
  if (s.meat)
    s.meat = out.meat;
  s.loss = -7.0;
  s.weighted_norm = -7.0;
  RhCudaStatus status = rh_cuda_engine_row_statistics(engine, b, &s);
  if (status != RH_CUDA_INVALID_ARGUMENT) {
    fprintf(stderr, "line %d: status %d, expected INVALID_ARGUMENT\n", line, (int)status);
    ++rh_test_failures;
  }
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), needle);
  Outputs sentinel;
  memset(&sentinel, 0x5a, sizeof sentinel);
  CHECK(memcmp(&out, &sentinel, sizeof out) == 0);
  CHECK(s.loss == -7.0 && s.weighted_norm == -7.0);
}

static void test_every_refusal(void) {
  RhCudaEngine* engine = new_engine(RH_CUDA_DTYPE_FLOAT64);
  Outputs out;
  const RhCudaRowStatistics good = request(RH_CUDA_STATISTIC_ALL, BETA, &out);
  const RhCudaHostBatch batch = rh_batch(XD, YD, NULL, NR, NP, NR);
  RhCudaRowStatistics s;
  RhCudaHostBatch b;

  CHECK_STATUS(rh_cuda_engine_row_statistics(NULL, &batch, &s), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_last_error(), "engine is NULL");
  CHECK_STATUS(rh_cuda_engine_row_statistics(engine, &batch, NULL), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), "RhCudaRowStatistics pointer is NULL");

  s = good;
  s.abi_version = 1;
  refused(engine, &batch, s, "RhCudaRowStatistics.abi_version is 1", __LINE__);
  s = good;
  s.struct_size = 80;
  refused(engine, &batch, s, "RhCudaRowStatistics.struct_size is 80", __LINE__);
  s = good;
  s.statistics = 0;
  refused(engine, &batch, s, "RhCudaRowStatistics.statistics is 0", __LINE__);
  s = good;
  s.statistics = 0x7f;
  refused(engine, &batch, s, "unknown bits 0x40", __LINE__);
  s = good;
  s.coefficients = NULL;
  refused(engine, &batch, s, "RhCudaRowStatistics.coefficients is NULL", __LINE__);
  s = good;
  s.tau = 0.0;
  refused(engine, &batch, s, "RhCudaRowStatistics.tau is 0", __LINE__);
  s = good;
  s.tau = NAN;
  refused(engine, &batch, s, "RhCudaRowStatistics.tau is nan", __LINE__);
  s = good;
  s.bandwidth = 1e-310;
  refused(engine, &batch, s, "RhCudaRowStatistics.bandwidth is", __LINE__);
  s = good;
  s.bandwidth = INFINITY;
  refused(engine, &batch, s, "RhCudaRowStatistics.bandwidth is inf", __LINE__);
  s = good;
  s.score = NULL;
  refused(engine, &batch, s, "RhCudaRowStatistics.score is NULL", __LINE__);
  s = good;
  s.curvature_gram = NULL;
  refused(engine, &batch, s, "curvature_gram is NULL", __LINE__);
  s = good;
  s.majoriser_gram = NULL;
  refused(engine, &batch, s, "majoriser_gram is NULL", __LINE__);
  s = good;
  s.meat = NULL;
  refused(engine, &batch, s, "RhCudaRowStatistics.meat is NULL", __LINE__);
  s = good;
  s.statistics = RH_CUDA_STATISTIC_LOSS;
  s.score = NULL;
  s.curvature_gram = NULL;
  s.majoriser_gram = NULL;
  refused(engine, &batch, s,
          "RhCudaRowStatistics.meat is set but statistics (0x1) does not request MEAT", __LINE__);

  refused(engine, NULL, good, "RhCudaHostBatch pointer is NULL", __LINE__);
  b = batch;
  b.abi_version = 3;
  refused(engine, &b, good, "RhCudaHostBatch.abi_version is 3", __LINE__);
  b = batch;
  b.x_design = NULL;
  refused(engine, &b, good, "RhCudaHostBatch.x_design is NULL", __LINE__);
  b = batch;
  b.y = NULL;
  refused(engine, &b, good, "RhCudaHostBatch.y is NULL", __LINE__);
  b = batch;
  b.n_columns = NF;
  refused(engine, &b, good, "RhCudaHostBatch.n_columns is 4", __LINE__);
  b = batch;
  b.n_rows = 0;
  refused(engine, &b, good, "RhCudaHostBatch.n_rows is 0", __LINE__);
  b = batch;
  b.n_rows = INT64_MAX / 2;
  refused(engine, &b, good, "overflows", __LINE__);
  b = batch;
  b.batch_weight = -1.0;
  refused(engine, &b, good, "RhCudaHostBatch.batch_weight is -1", __LINE__);
  /* Arrays not aligned to their elements: 4 bytes into double-aligned memory. */
  b = batch;
  b.x_design = (const char*)XD + 4;
  refused(engine, &b, good, "RhCudaHostBatch.x_design (0x", __LINE__);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), ") is not aligned to its 8-byte elements");
  b = batch;
  b.y = (const char*)YD + 4;
  refused(engine, &b, good, "RhCudaHostBatch.y (0x", __LINE__);
  s = good;
  s.coefficients = (const char*)BETA + 4;
  refused(engine, &batch, s, "RhCudaRowStatistics.coefficients (0x", __LINE__);
  /* A misaligned output (its address copied in, as a caller's cast would give it): refused, and
   * the memory around it is not written. */
  static double room[NP * NP + 1];
  memset(room, 0x5a, sizeof room);
  const char* odd = (const char*)room + 4;
  s = good;
  memcpy(&s.curvature_gram, &odd, sizeof odd);
  CHECK_STATUS(rh_cuda_engine_row_statistics(engine, &batch, &s), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), "RhCudaRowStatistics.curvature_gram (0x");
  for (size_t k = 0; k < sizeof room; ++k) {
    CHECK(((const unsigned char*)room)[k] == 0x5a);
  }
  b = batch;
  b.batch_weight = 5.0;
  refused(engine, &b, good, "without sample_weight it must equal n_rows", __LINE__);
  b = rh_batch(XD, YD, WD, NR, NP, weight_sum(0) + 50.0);
  refused(engine, &b, good, "sample_weight sums to", __LINE__);

  /* Bad values: a copy of the data with one value spoiled at a time. */
  static double x[NR * NP], y[NR], w[NR], beta[NP];
  memcpy(x, XD, sizeof x);
  memcpy(y, YD, sizeof y);
  memcpy(w, WD, sizeof w);
  memcpy(beta, BETA, sizeof beta);
  const double total = weight_sum(0);
  x[7 * NP + 2] = NAN;
  b = rh_batch(x, y, w, NR, NP, total);
  refused(engine, &b, good, "RhCudaHostBatch.x_design[7, 2] is nan", __LINE__);
  x[7 * NP + 2] = XD[7 * NP + 2];
  y[11] = INFINITY;
  b = rh_batch(x, y, w, NR, NP, total);
  refused(engine, &b, good, "RhCudaHostBatch.y[11] is inf", __LINE__);
  y[11] = YD[11];
  w[3] = -w[1];
  b = rh_batch(x, y, w, NR, NP, total - w[1] - WD[3]);
  refused(engine, &b, good, "RhCudaHostBatch.sample_weight[3] is negative", __LINE__);
  w[3] = NAN;
  b = rh_batch(x, y, w, NR, NP, total);
  refused(engine, &b, good, "RhCudaHostBatch.sample_weight[3] is nan", __LINE__);
  beta[2] = -INFINITY;
  s = good;
  s.coefficients = beta;
  b = rh_batch(XD, YD, NULL, NR, NP, NR);
  refused(engine, &b, s, "RhCudaRowStatistics.coefficients[2] is -inf", __LINE__);
  rh_cuda_engine_destroy(engine);
}

/* Version 2: rows in device memory. librh_cpu exports the symbol and refuses every call:
 * INVALID_ARGUMENT without an engine (the thread's last error), else UNAVAILABLE with a message
 * that names the entry point and the way out, whatever the request; outputs and state untouched. */
static void test_device_rows_are_unavailable(void) {
  CHECK(rh_cuda_row_statistics_version() >= 2u);
  Outputs out;
  memset(&out, 0x5a, sizeof out);
  RhCudaRowStatistics s = request(RH_CUDA_STATISTIC_ALL, BETA, &out);
  s.loss = -7.0;
  s.weighted_norm = -7.0;
  RhCudaDeviceBatch b;
  memset(&b, 0, sizeof b);
  CHECK_STATUS(rh_cuda_engine_row_statistics_device(NULL, &b, &s), RH_CUDA_INVALID_ARGUMENT);
  CHECK_CONTAINS(rh_cuda_last_error(), "engine is NULL");

  RhCudaEngine* engine = new_engine(RH_CUDA_DTYPE_FLOAT64);
  double c0[NP], i0[NP * NP], c1[NP], i1[NP * NP];
  RhCudaHostState st = rh_state_out(c0, i0);
  CHECK_STATUS(rh_cuda_engine_copy_state(engine, &st), RH_CUDA_SUCCESS);
  /* A well-formed batch (host pointers: the CPU engine never reads them), a zeroed one and no
   * batch or request at all: the same refusal. */
  RhCudaHostBatch host = rh_batch(XD, YD, NULL, NR, NP, NR);
  memcpy(&b, &host, sizeof b);
  CHECK_STATUS(rh_cuda_engine_row_statistics_device(engine, &b, &s), RH_CUDA_UNAVAILABLE);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine),
                 "rh_cuda_engine_row_statistics_device: the CPU engine (librh_cpu) cannot read "
                 "device memory");
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), "rh_cuda_engine_row_statistics or use");
  CHECK_STATUS(rh_cuda_engine_row_statistics_device(engine, NULL, NULL), RH_CUDA_UNAVAILABLE);
  CHECK_CONTAINS(rh_cuda_engine_last_error(engine), "device memory");
  Outputs sentinel;
  memset(&sentinel, 0x5a, sizeof sentinel);
  CHECK(memcmp(&out, &sentinel, sizeof out) == 0);
  CHECK(s.loss == -7.0 && s.weighted_norm == -7.0);
  RhCudaHostState after = rh_state_out(c1, i1);
  CHECK_STATUS(rh_cuda_engine_copy_state(engine, &after), RH_CUDA_SUCCESS);
  CHECK(memcmp(c0, c1, sizeof c0) == 0 && memcmp(i0, i1, sizeof i0) == 0);
  /* A later call clears the last error: the refusal left nothing behind. */
  CHECK_STATUS(rh_cuda_engine_row_statistics(engine, &host, &s), RH_CUDA_SUCCESS);
  CHECK(strcmp(rh_cuda_engine_last_error(engine), "") == 0);
  rh_cuda_engine_destroy(engine);
}

int main(void) {
  make_data();
  RUN_TEST(test_sums_match_their_definitions);
  RUN_TEST(test_version_and_untouched_state);
  RUN_TEST(test_every_refusal);
  RUN_TEST(test_device_rows_are_unavailable);
  return TEST_MAIN_RESULT();
}
