/*
 * The Gram's compute kernel on packed panels (gram.c packs, this multiplies). Self-contained:
 * no engine types, so the C tests compile it directly against a naive loop.
 *
 * Panel layout: the columns of a chunk of `depth` rows are cut into groups of
 * RH_PANEL_WIDTH; group g occupies stride * RH_PANEL_WIDTH doubles starting at
 * panel + g * stride * RH_PANEL_WIDTH, row k of the chunk at offset k * RH_PANEL_WIDTH in it.
 * Columns past the design's last are zero.
 */
#ifndef RH_GRAM_KERNEL_H
#define RH_GRAM_KERNEL_H

#include <stdint.h>

#define RH_PANEL_WIDTH 8

/* c[i * ldc + j] += sum_{k < depth} scaled(k, i) plain(k, j) for every i < groups * 8 and every
 * j of the same column group as i or later (the upper triangle and the lower halves of the
 * diagonal tiles). Each entry adds its terms in k order onto its previous value, whatever the
 * instruction set, so the result depends on nothing but the inputs. */
void rh_panel_gram_upper(const double* scaled, const double* plain, int64_t depth, int64_t stride,
                         int64_t groups, double* c, int64_t ldc);

#endif /* RH_GRAM_KERNEL_H */
