"""The tiled one-block elimination of tiled-cholesky.patch, emulated on the host thread by thread
and step by step: every element of the upper triangle of [H | g] has exactly one owner, and the
published rows (R, the pivots and w) equal a plain row-by-row symmetric elimination's bit for bit
(both in Python's double arithmetic, the same operations in the same order). Checked for
P = 1-39 and the standard and large shapes' sizes before the kernel ran on the GPU.

    python3 tile_emulation.py
"""

import random

TILE = 4  # rows and columns of a thread's tile


def tile_shape(P):
    """(upper tiles, tile rows, tile columns) of the P x (P + 1) augmented matrix."""
    rows = (P + TILE - 1) // TILE
    cols = (P + 1 + TILE - 1) // TILE
    return rows * cols - rows * (rows - 1) // 2, rows, cols


def tiles_of(H, g):
    """Each thread's (owner, first row, first column, tile) as the kernel assembles them."""
    P = len(g)
    count, _, cols = tile_shape(P)
    tiles = []
    for tid in range((count + 31) // 32 * 32):
        owner = tid < count
        tile_row, index = 0, tid
        while owner and index >= cols - tile_row:
            index -= cols - tile_row
            tile_row += 1
        r0, c0 = tile_row * TILE, (tile_row + index) * TILE
        a = [[0.0] * TILE for _ in range(TILE)]
        for q in range(TILE):
            for c in range(TILE):
                i, j = r0 + q, c0 + c
                if owner and i < P and i <= j <= P:
                    a[q][c] = g[i] if j == P else H[i][j]
        tiles.append((owner, r0, c0, a))
    return tiles


def check_ownership(tiles, P):
    seen = set()
    for owner, r0, c0, _ in tiles:
        if not owner:
            continue
        for q in range(TILE):
            for c in range(TILE):
                i, j = r0 + q, c0 + c
                if i < P and i <= j <= P:
                    assert (i, j) not in seen
                    seen.add((i, j))
    assert len(seen) == P * (P + 3) // 2


def tiled(H, g):
    """R (row-major, above the diagonal), the pivots and w as the kernel publishes them."""
    P = len(g)
    tiles = tiles_of(H, g)
    check_ownership(tiles, P)
    factor = [[None] * P for _ in range(P)]
    pivots, inverse, rhs = [None] * P, [None] * P, [None] * P
    pivot_rows = [[None] * (P + 1), [None] * (P + 1)]

    def publish(r0, c0, a, row):
        for q in range(TILE):
            if r0 + q != row:
                continue
            for c in range(TILE):
                j = c0 + c
                if j < row or j > P:
                    continue
                value = a[q][c]
                pivot_rows[row & 1][j] = value
                if j == P:
                    rhs[row] = value
                elif j > row:
                    factor[row][j] = value
                else:
                    pivots[row] = value
                    inverse[row] = 1.0 / value

    for owner, r0, c0, a in tiles:
        if owner and r0 == 0:
            publish(r0, c0, a, 0)
    for kk in range(P - 1):
        pivot_row = pivot_rows[kk & 1]
        for owner, r0, c0, a in tiles:
            if not owner or r0 + TILE - 1 <= kk:
                continue
            right = [pivot_row[c0 + c] if kk < c0 + c <= P else 0.0 for c in range(TILE)]
            for q in range(TILE):
                i = r0 + q
                if i <= kk or i >= P:
                    continue
                scale = pivot_row[i] * inverse[kk]
                for c in range(TILE):
                    a[q][c] = a[q][c] - scale * right[c]
            if r0 <= kk + 1 < r0 + TILE:
                publish(r0, c0, a, kk + 1)
    return factor, pivots, rhs


def plain(H, g):
    """Symmetric elimination of [H | g], row by row."""
    P = len(g)
    A = [H[i][:] + [g[i]] for i in range(P)]
    for kk in range(P - 1):
        inverse = 1.0 / A[kk][kk]
        for i in range(kk + 1, P):
            for j in range(i, P + 1):
                A[i][j] = A[i][j] - (A[kk][i] * inverse) * A[kk][j]
    return A


def main():
    rng = random.Random(1)
    for P in [*range(1, 40), 63, 64, 65, 90, 91, 127, 128, 129, 159, 160]:
        X = [[rng.gauss(0, 1) for _ in range(P)] for _ in range(P + 3)]
        H = [[sum(X[r][i] * X[r][j] for r in range(P + 3)) + (i == j) for j in range(P)]
             for i in range(P)]
        g = [rng.gauss(0, 1) for _ in range(P)]
        factor, pivots, rhs = tiled(H, g)
        A = plain(H, g)
        for i in range(P):
            assert pivots[i] == A[i][i] and rhs[i] == A[i][P], (P, i)
            assert all(factor[i][j] == A[i][j] for j in range(i + 1, P)), (P, i)
    print("tiled elimination == plain elimination, bit for bit")


if __name__ == "__main__":
    main()
