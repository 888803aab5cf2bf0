/* The scalar pieces of docs/algorithm.md, inlined into the row passes (rho itself is
 * rh_algorithm.h's rh_huber_rho). */
#ifndef RH_HUBER_PIECES_H
#define RH_HUBER_PIECES_H

#include <math.h>

#include "rh_algorithm.h"

static inline double rh_huber_score(double r, double tau) {
  return r < -tau ? -tau : (r > tau ? tau : r);
}

/* 1 / (2h), the ramps' slope: a multiply per row instead of a divide (a vector divide costs
 * more than the rest of the Huber pieces together); within an ulp of dividing by 2h. */
static inline double rh_curvature_slope(double h) {
  return 0.5 / h;
}

/* Derivative of the paper's quadratic-transition score: linear ramps of half-width h around
 * +-tau, 1 inside, 0 outside; slope = rh_curvature_slope(h), computed once by the caller. */
static inline double rh_smoothed_curvature(double r, double tau, double h, double slope) {
  double rising = 0.5 + (r + tau) * slope;
  double falling = 0.5 - (r - tau) * slope;
  return r < -tau - h    ? 0.0
         : r > tau + h   ? 0.0
         : r <= -tau + h ? rising
         : r >= tau - h  ? falling
                         : 1.0;
}

static inline double rh_soft_threshold(double v, double t) {
  double magnitude = fabs(v) - t;
  if (!(magnitude > 0.0)) {
    return 0.0;
  }
  return v > 0.0 ? magnitude : -magnitude;
}

#endif /* RH_HUBER_PIECES_H */
