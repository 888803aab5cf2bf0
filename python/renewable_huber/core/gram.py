"""The weighted Gram X' diag(v) X, made bitwise symmetric.

BLAS computes the two triangles of X' (v X) in different orders, so they can differ in the
last bit; mirroring one triangle keeps the information exactly symmetric, which is what
routes the Newton system to Cholesky (docs/decisions.md)."""

from __future__ import annotations


def weighted_gram(xp, X, v):
    """X' diag(v) X for X (n, P) and v (n,), exactly symmetric, in X's dtype."""
    gram = X.T @ (v[:, None] * X)
    upper = xp.triu(gram)
    return upper + xp.triu(gram, 1).T
