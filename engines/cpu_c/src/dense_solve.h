/*
 * dense_solve.h -- the two minimum-norm solvers behind rh_dense_solve's last rung (internal to
 * dense_solve.c; declared here so engines/cpu_c/tests/test_dense_solve.c, which compiles
 * dense_solve.c directly, can compare them on the same matrices).
 *
 * Both return x = A^+ b with the singular values of A below eps * P * sigma_max treated as
 * zero (docs/decisions.md, "Linear solve ladder"), and store the number of singular values
 * kept in *rank. Both use only ws->factor, ws->right_vectors
 * (P x P each), ws->singular_values and ws->scratch (P each); x must not alias b or any of
 * them.
 */
#ifndef RH_DENSE_SOLVE_H
#define RH_DENSE_SOLVE_H

#include <stdint.h>

#include "cpu_engine.h"

/* Any square a: one-sided Jacobi SVD. */
void rh_min_norm_jacobi_solve(const double* a, const double* b, int64_t P, double eps,
                              RhWorkspace* ws, double* x, int64_t* rank);

/* Symmetric a only (the caller checked it is bitwise symmetric): Householder tridiagonalisation and
 * implicit shifted QR on the tridiagonal; the singular values of a symmetric matrix are the
 * magnitudes of its eigenvalues. Returns 0, with x unspecified, when a is not finite or the QR
 * iteration did not converge within its bound (the caller then uses the Jacobi SVD). */
int rh_min_norm_symmetric_solve(const double* a, const double* b, int64_t P, double eps,
                                RhWorkspace* ws, double* x, int64_t* rank);

#endif /* RH_DENSE_SOLVE_H */
