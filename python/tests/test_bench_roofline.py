"""The roofline model of benchmarks/roofline.py against hand-counted passes, and its table.

Expected numbers are counted here from the engine's pass structure (docs in the module), not
taken from the implementation: n rows, c features, P = c + 1, s bytes per value.
"""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import record, roofline, synthetic, validate  # noqa: E402

CONSTANTS = {"bandwidth_bytes_per_s": 1e12, "gemm_float64_flops_per_s": 1e13,
             "gemm_float32_flops_per_s": 2e13, "launch_s": 2e-6, "sync_s": 1e-5,
             "host_to_device_bytes_per_s": 5e10}


def device_json(**overrides) -> dict:
    return {"schema": "renewable-huber-device-constants", "version": 1,
            "created": "2026-01-01T00:00:00+00:00",
            "fingerprint": {"name": "synthetic GPU", "compute_capability": "9.0",
                            "memory_bytes": 2**37, "driver_version": 13000,
                            "runtime_version": 13000},
            "model": {**CONSTANTS, **overrides}}


def device(**overrides) -> roofline.DeviceConstants:
    return roofline.DeviceConstants.from_json(device_json(**overrides))


def test_ideal_floor_of_one_newton_batch():
    # 4,096 x 16 float64, 5 iterations: 5 reads of X and y (17 columns of 8 bytes), 5 Grams of
    # 2 * 4096 * 17^2 flops, 5 launches, 1 synchronisation, nothing over PCIe (device input).
    work = roofline.ideal_work(4096, 16, 8, 5, l1=False, host=False)
    assert work.bytes == 5 * 4096 * 17 * 8 == 2_785_280
    assert work.flops == 5 * 2 * 4096 * 289 == 11_837_440
    assert (work.launches, work.syncs, work.transfer_bytes) == (5, 1, 0)
    t = work.seconds(device(), "float64")
    assert t["memory"] == pytest.approx(2.78528e-6)
    assert t["gram"] == pytest.approx(1.183744e-6)
    assert t["launch"] == pytest.approx(1e-5) and t["sync"] == pytest.approx(1e-5)
    assert t["total"] == pytest.approx(2.78528e-6 + 1.183744e-6 + 2e-5)
    # LAMM: one Gram at the solution; host input adds the batch once over the link.
    lamm = roofline.ideal_work(4096, 16, 4, 3, l1=True, host=True)
    assert lamm.bytes == 3 * 4096 * 17 * 4
    assert lamm.flops == 2 * 4096 * 289
    assert lamm.transfer_bytes == 4096 * 17 * 4
    assert lamm.seconds(device(), "float32")["transfer"] == pytest.approx(278_528 / 5e10)
    # zero iterations still read the batch once
    assert roofline.ideal_work(100, 3, 8, 0, l1=False, host=False).bytes == 100 * 4 * 8


def test_fused_gram_blocks_follow_the_engine():
    # P = 17 pads to 24 (three 8-column blocks); up to 64 padded columns the pass aims at 264
    # blocks of whole 64-row tiles: 4,096 rows -> 16 per block -> one tile of 64 -> 64 blocks.
    assert roofline.fused_gram_blocks(4096, 17) == (64, 24)
    # P = 33 pads to 40: 65,536 rows -> 249 -> 256 (four tiles) per block -> 256 blocks.
    assert roofline.fused_gram_blocks(65_536, 33) == (256, 40)
    # P = 91 pads to 96, one 32-row tile per team and 132 blocks aimed at: 32,768 rows -> 249
    # -> 256 per block -> 128 blocks; P = 128 is the last width the pass forms.
    assert roofline.fused_gram_blocks(32_768, 91) == (128, 96)
    assert roofline.fused_gram_blocks(100, 128) == (4, 128)


def fused_pass_bytes(n: int, c: int, s: int, blocks: int, pad: int) -> tuple[int, int]:
    """(X and y, one row pass forming X'u and the Gram itself) in bytes, counted by hand: the
    pass reads X and y, writes a double per row and writes, then sums, `blocks` partial Grams
    padded to pad x pad doubles."""
    batch = n * (c + 1) * s
    return batch, batch + 8 * n + 2 * 8 * blocks * pad * pad


def test_engine_floor_of_a_newton_batch_with_the_one_block_cholesky():
    # 4,096 x 16 float64, 5 iterations, a new engine: first chunk 4, later chunks 2, so 6
    # iterations are queued over 2 synchronisations and one runs past the end.
    n, c, s = 4096, 16, 8
    # X'u inside the pass (c <= 32): no scores; its 64 partial Grams pad to 24 x 24.
    batch, row_pass = fused_pass_bytes(n, c, s, 64, 24)
    trials = n * c * s + 8 * n  # X and the residuals
    # The iteration queued past the end moves nothing: its kernels return at once. Device input
    # has no validation pass (the objective at beta0 checks it).
    expected_bytes = row_pass + 5 * (trials + row_pass)
    # 2 * 4096 * 17^2 per Gram: the starting one and 5 real ones
    expected_flops = 6 * 2 * 4096 * 17 * 17
    # Fixed: begin, row pass, gradient (which sums the Gram too), 2 commits; per queued
    # iteration: Cholesky, trials, select, row pass, gradient with the Gram sum.
    expected_launches = 3 + 2 + 6 * 5
    work = roofline.engine_work(n, c, s, 5, l1=False, host=False, hint=0)
    assert work.bytes == expected_bytes == 9_863_168
    assert work.flops == expected_flops == 14_204_928
    assert (work.launches, work.syncs) == (expected_launches, 2) == (35, 2)
    t = work.seconds(device(), "float64")
    assert t["total"] == pytest.approx(9_863_168 / 1e12 + 14_204_928 / 1e13 + 35 * 2e-6
                                       + 2 * 1e-5)
    # Host input adds the validation pass (a read of the batch, a launch) and the copy.
    host = roofline.engine_work(n, c, s, 5, l1=False, host=True, hint=0)
    assert (host.bytes - work.bytes, host.launches - work.launches) == (batch, 1)
    assert host.transfer_bytes == batch


def test_engine_floor_of_a_speculative_newton_batch():
    # The same batch from a fitted beta0 (a stream's second batch on): each iteration forms the
    # candidate in the Cholesky kernel, runs the row pass there and judges the whole step in
    # the gradient's launch, with no trials pass and no select kernel (every step counted as
    # accepted).
    n, c, s = 4096, 16, 8
    batch, row_pass = fused_pass_bytes(n, c, s, 64, 24)
    work = roofline.engine_work(n, c, s, 5, l1=False, host=False, hint=0, fitted_start=True)
    assert work.bytes == row_pass + 5 * row_pass
    assert work.flops == 6 * 2 * 4096 * 17 * 17
    # Fixed: begin, row pass, gradient, 2 commits; per queued iteration (6): Cholesky with the
    # candidate, row pass, gradient with the Gram's sum and the verdict.
    assert (work.launches, work.syncs) == (3 + 2 + 6 * 3, 2)
    # Above the one-block limit the candidate takes J dir's launch: the same count as before,
    # less the trials and the select.
    line_search = roofline.engine_work(4096, 256, s, 4, l1=False, host=False, hint=0)
    speculative = roofline.engine_work(4096, 256, s, 4, l1=False, host=False, hint=0,
                                       fitted_start=True)
    assert line_search.launches - speculative.launches == 4 * 2
    assert line_search.bytes - speculative.bytes == 4 * (4096 * 256 * s + 8 * 4096)
    # So does Newton's incremental Gram (50,000 x 257: 2 n P^2 = 6.6e9 > 2e9, one iteration a
    # chunk, none queued past the end): each iteration without the trials' read of X and the
    # residuals, and without their two launches.
    heavy = dict(l1=False, host=False, hint=0)
    searched = roofline.engine_work(50_000, 256, s, 3, **heavy)
    judged = roofline.engine_work(50_000, 256, s, 3, **heavy, fitted_start=True)
    assert searched.bytes - judged.bytes == 3 * (50_000 * 256 * s + 8 * 50_000)
    assert (searched.launches - judged.launches, searched.syncs, judged.syncs) == (3 * 2, 3, 3)


def test_fused_row_pass_forms_x_u_at_every_width_it_takes():
    # 32,768 x 90 float64 (P = 91, the reference shape's batch) from a fitted beta0, 3
    # iterations: the fused pass forms X'u itself, so no row pass writes scores and no gemv
    # reads X again; its 128 blocks' partial Grams pad to 96.
    n, c, s = 32_768, 90, 8
    batch, row_pass = fused_pass_bytes(n, c, s, 128, 96)
    work = roofline.engine_work(n, c, s, 3, l1=False, host=False, hint=0, fitted_start=True)
    # Queued: a first chunk of 4 (the engine's default hint), one iteration past the end.
    assert work.bytes == row_pass + 3 * row_pass
    # The launches of a batch of 16 columns, whose X'u the pass always formed: no gemv.
    narrow = roofline.engine_work(n, 16, s, 3, l1=False, host=False, hint=0, fitted_start=True)
    assert (work.launches, work.syncs) == (narrow.launches, narrow.syncs) == (16, 1)
    # Above 128 parameters cuBLAS forms the Gram, and the row pass still forms X'u (c <= 512).
    wide = roofline.engine_work(n, 129, s, 3, l1=False, host=False, hint=0, fitted_start=True)
    assert wide.bytes > work.bytes


def test_engine_floor_of_a_lamm_batch_on_host_input(monkeypatch):
    # 4,096 x 16 float32 L1, 3 iterations, new engine: one chunk of 4 (one queued past the end).
    n, c, s = 4096, 16, 4
    batch = n * (c + 1) * s
    partials = 8 * 64 * 24 * 24
    row_pass = batch + 8 * n  # X'u inside the pass, no Gram
    final_row_pass = batch + 8 * n + n * s + 2 * partials  # scores, and the fused Gram
    # 16 stored columns: the first attempt group's trials form X'psi too, so an iteration's
    # row pass returns at once (its launch stays).
    expected_bytes = (batch  # validation
                      + row_pass  # at the starting beta
                      + 3 * batch  # first attempt group's trials
                      + final_row_pass)
    # validation, begin, row pass, gradient, commit; 4 queued iterations of 6 attempt-group
    # launches (candidates, trials with J delta, pick; twice), row pass, gradient; after the
    # chunk: the final row pass and its Gram sum.
    expected_launches = 5 + 4 * 8 + 2
    work = roofline.engine_work(n, c, s, 3, l1=True, host=True, hint=0)
    assert work.bytes == expected_bytes == 2_342_912
    assert work.flops == 2 * 4096 * 17 * 17
    assert (work.launches, work.syncs) == (expected_launches, 1) == (39, 1)
    assert work.transfer_bytes == batch
    # Where the trials form no X'psi (outside 9 to 128 columns), each iteration's row pass reads
    # the batch again and writes the residuals.
    monkeypatch.setattr(roofline, "LAMM_TRIALS_GRADIENT_COLUMNS", (17, 128))
    by_row_pass = roofline.engine_work(n, c, s, 3, l1=True, host=True, hint=0)
    assert by_row_pass.bytes - work.bytes == 3 * row_pass
    assert (by_row_pass.launches, by_row_pass.flops) == (work.launches, work.flops)


def test_lamm_groups_launch_j_delta_apart_on_large_batches():
    # Up to 2^22 stored values J delta runs in the trials' launch (the standard streaming
    # batch, 65,536 x 32 = 2^21), above it in its own (large-stream, 262,144 x 128 = 2^25).
    assert roofline.lamm_group_launches(65_536, 32) == 3
    assert roofline.lamm_group_launches(2 ** 22, 1) == 3
    assert roofline.lamm_group_launches(2 ** 22 + 1, 1) == 4
    assert roofline.lamm_group_launches(262_144, 128) == 4
    # 3 iterations on a new engine queue one chunk of 4: two groups each, real or not. 8
    # columns, 600,000 rows against 500,000 (4.8e6 and 4.0e6 values; both Grams light and
    # fused: the same launches otherwise).
    large = roofline.engine_work(600_000, 8, 8, 3, l1=True, host=False, hint=0)
    small = roofline.engine_work(500_000, 8, 8, 3, l1=True, host=False, hint=0)
    assert large.syncs == small.syncs
    assert large.launches - small.launches == 4 * 2


def test_lamm_with_a_heavy_gram_forms_it_once_after_one_more_synchronisation():
    # 20,000 x 256 float64 L1 (2 n P^2 = 2.64e9 > 2e9), 9 iterations on a new engine: chunks of
    # 4, 4, 4 (three synchronisations), then one readback-and-wait that shows the end: the
    # Gram's flops once, where a light Gram would be formed after each of the three chunks.
    # (P = 257 is one past four 64-column tiles: the GEMM forms 256 columns, a gemv the last.)
    n, P = 20_000, 257
    heavy = roofline.engine_work(n, 256, 8, 9, l1=True, host=False, hint=0)
    assert heavy.flops == 2 * n * (P - 1) * (P - 1)
    assert heavy.syncs == 3 + 1
    light = roofline.engine_work(2_000, 256, 8, 9, l1=True, host=False, hint=0)
    assert light.flops == 3 * (2 * 2_000 * (P - 1) * (P - 1))
    assert light.syncs == 3
    # Up to 128 parameters the row pass forms the Gram and skips by itself until the solve
    # ended: a heavy Gram (2 * 65,536 * 128^2 = 2.1e9) needs no readback, and is formed once.
    fused = roofline.engine_work(65_536, 127, 8, 9, l1=True, host=False, hint=0)
    assert fused.flops == 2 * 65_536 * 128 * 128 > 2e9
    assert fused.syncs == 3


def test_lamm_forms_the_grams_last_column_in_its_final_row_pass(monkeypatch):
    # 262,144 x 128 float64 L1 (the large-stream shape), 20 iterations on an engine whose last
    # update needed 4: P = 129 is one past two 64-column tiles, so the GEMM forms 128 columns.
    # Newton's Gram passes leave the last column to a gemv that reads the scaled rows once more;
    # LAMM's final row pass forms it itself (up to 1,024 parameters): per Gram the finish has
    # one read of the scaled rows and one launch fewer. Above that limit (here: the limit moved
    # below P) the finish has the gemv too.
    n, c, s, P = 262_144, 128, 8, 129
    in_pass = roofline.engine_work(n, c, s, 20, l1=True, host=False, hint=4)
    monkeypatch.setattr(roofline, "ROW_PASS_XTU_MAX_COLUMNS", 128)
    by_gemv = roofline.engine_work(n, c, s, 20, l1=True, host=False, hint=4)
    # 2 n P^2 = 8.7e9 > 2e9: a heavy Gram, formed once after the readback that shows the end.
    assert in_pass.flops == by_gemv.flops == 2 * n * (P - 1) * (P - 1)
    assert by_gemv.bytes - in_pass.bytes == n * P * s
    assert by_gemv.launches - in_pass.launches == 1
    # A light Gram (2,000 rows) queued after each of its chunks: the GEMM (and the gemv, where
    # there is one) runs in full after every chunk.
    light_by_gemv = roofline.engine_work(2_000, c, s, 9, l1=True, host=False, hint=0)
    monkeypatch.setattr(roofline, "ROW_PASS_XTU_MAX_COLUMNS", 1_024)
    light_in_pass = roofline.engine_work(2_000, c, s, 9, l1=True, host=False, hint=0)
    assert light_in_pass.syncs == light_by_gemv.syncs == 3
    assert light_by_gemv.bytes - light_in_pass.bytes == 3 * 2_000 * P * s
    assert light_by_gemv.launches - light_in_pass.launches == 3


def test_newton_forms_the_grams_last_column_beside_xtu_in_float64(monkeypatch):
    # 262,144 x 128 Newton, 3 iterations on an engine whose last update needed 4, the Gram
    # formed in full at every pass (INCREMENTAL_GRAM off): 5 Gram passes (the batch's first, 3
    # iterations and one queued past the end, whose GEMM runs in full). P = 129 is one past two
    # 64-column tiles, so the GEMM forms 128 columns. In float64 the row pass forms the last
    # column beside X'u (per-block partials, not counted): per Gram one read of the scaled rows
    # and one launch fewer than the gemv. Float32 keeps the gemv.
    monkeypatch.setattr(roofline, "INCREMENTAL_GRAM", False)
    n, c, P, k = 262_144, 128, 129, 3
    passes = 1 + k + 1
    for s, in_pass in ((8, True), (4, False)):
        shipped = roofline.engine_work(n, c, s, k, l1=False, host=False, hint=4)
        monkeypatch.setattr(roofline, "ROW_PASS_COLUMN_WITH_XTU_MAX_COLUMNS", c - 1)
        by_gemv = roofline.engine_work(n, c, s, k, l1=False, host=False, hint=4)
        monkeypatch.setattr(roofline, "ROW_PASS_COLUMN_WITH_XTU_MAX_COLUMNS", c)
        assert by_gemv.flops == shipped.flops
        assert by_gemv.bytes - shipped.bytes == (passes * n * P * s if in_pass else 0)
        assert by_gemv.launches - shipped.launches == (passes if in_pass else 0)


def test_engine_floor_above_the_one_block_limit(monkeypatch):
    # 4,096 x 256 float64 Newton: P = 257 > 160 so the cluster kernel factors and solves (P <=
    # 383); 2 n P^2 = 5.4e8 <= 2e9 so the first chunk is 2 and later chunks 1: 4 iterations in
    # chunks 2, 1, 1.
    n, c, s, P = 4096, 256, 8, 257
    assert roofline.chunk_sizes(l1=False, above_one_block=True, n=n, P=P, hint=0) == (2, 1)
    assert roofline.queued_iterations(4, 2, 1) == (4, 3)
    # Gram: the GEMM forms 256 columns (P is one past four tiles), a gemv the last: 16 tiles of
    # 64 -> 264 // 16 = 16 chunks of 256 rows = 4,096 rows, no zeroed rows
    assert roofline.gram_split(n, P, s) == (16, 256)
    batch = n * (c + 1) * s
    scaled = n * P * s
    row_pass = batch + 8 * n + scaled  # X'u inside the pass (c <= 512): no scores
    gram_reads = n * (P - 1) * s + scaled  # the GEMM's 256 columns, the gemv's whole rows
    trials = n * c * s + 8 * n
    expected = 5 * (row_pass + gram_reads) + 4 * trials  # device input: no validation pass
    work = roofline.engine_work(n, c, s, 4, l1=False, host=False, hint=0)
    assert work.bytes == expected
    assert work.flops == 5 * 2 * n * (P - 1) * (P - 1)
    # fixed: begin, row pass, GEMM, gemv, gradient with the Gram's sum, 3 commits; per
    # iteration: the cluster kernel (factor, acceptance test and solves), J dir, trials,
    # select, row pass, GEMM, gemv, gradient with the sum
    assert work.launches == 5 + 3 + 4 * 8 == 40
    # beyond the cluster Cholesky's limit cuSOLVER factors: assemble, potrf and the acceptance
    # test and solves, two launches more per iteration, the same bytes and chunks
    beyond = roofline.engine_work(n, c, s, 4, l1=False, host=False, hint=0,
                                  cluster_cholesky_max=256)
    assert beyond.launches == 5 + 3 + 4 * 10 == 48
    # Above 1,024 stored columns the row pass leaves the scores (n s) to cuBLAS's gemv, which
    # reads X and them again: 5 row passes, one launch each.
    n2, c2 = 2_000, 1_025
    wider = roofline.engine_work(n2, c2, s, 4, l1=False, host=False, hint=0)
    monkeypatch.setattr(roofline, "ROW_PASS_XTU_MAX_COLUMNS", 1_025)
    in_pass = roofline.engine_work(n2, c2, s, 4, l1=False, host=False, hint=0)
    assert wider.bytes - in_pass.bytes == 5 * (n2 * s + n2 * c2 * s + n2 * s)
    assert wider.launches - in_pass.launches == 5
    assert (beyond.bytes, beyond.syncs) == (work.bytes, work.syncs)
    # a heavy Gram (200,000 x 1,024: 2 n P^2 = 4.2e11) queues one iteration per chunk
    assert roofline.chunk_sizes(l1=False, above_one_block=True, n=50_000, P=1025, hint=9) == (1, 1)
    # a primed engine starts with its previous count, capped at 8
    assert roofline.chunk_sizes(l1=False, above_one_block=False, n=n, P=17, hint=12) == (8, 2)
    assert roofline.chunk_sizes(l1=True, above_one_block=False, n=n, P=17, hint=3) == (3, 4)
    # max_iter bounds the queue
    assert roofline.queued_iterations(100, 8, 2, max_iter=100) == (100, 47)
    with pytest.raises(ValueError, match="101 iterations in a batch"):
        roofline.queued_iterations(101, 8, 2, max_iter=100)


def test_gram_by_column_blocks_from_512_parameters(monkeypatch):
    # librh_cuda's gram_upper: P // 256 blocks, inner bounds rounded down to a multiple of 64;
    # where P is one past whole 64-column tiles the GEMM takes P - 1 columns (a gemv the last).
    assert roofline.gram_column_blocks(64, 8) == [(0, 64)]
    assert roofline.gram_column_blocks(65, 8) == [(0, 64)]
    assert roofline.gram_column_blocks(66, 8) == [(0, 66)]
    assert roofline.gram_column_blocks(129, 8) == [(0, 128)]
    assert roofline.gram_column_blocks(257, 8) == [(0, 256)]
    assert roofline.gram_column_blocks(511, 8) == [(0, 511)]
    assert roofline.gram_column_blocks(512, 8) == [(0, 256), (256, 512)]
    assert roofline.gram_column_blocks(513, 8) == [(0, 256), (256, 512)]
    assert roofline.gram_column_blocks(600, 8) == [(0, 256), (256, 600)]
    assert roofline.gram_column_blocks(1025, 8) == [(0, 256), (256, 512), (512, 768), (768, 1024)]
    # 50,000 x 1,024 float64, Newton, 2 iterations on an engine whose last update needed 2
    # (chunks of 1 above the heavy-Gram limit: nothing queued past the end): three Grams, the
    # starting beta's and one per iteration. Each is the upper triangle by the four blocks,
    # 2 n (256 * 256 + 512 * 256 + 768 * 256 + 1024 * 256) flops (62.4% of 2 n P^2: the last
    # column is a gemv's, no GEMM flops), four GEMMs, the gemv and the sum, the scaled rows
    # written once and read (256 + 512 + 768 + 1024) / 1025 times by the GEMMs, once by the gemv.
    # (Newton's Gram formed in full at every pass: the incremental Gram has its own test.)
    monkeypatch.setattr(roofline, "INCREMENTAL_GRAM", False)
    n, c, s, P = 50_000, 1024, 8, 1025
    per_gram = 2 * n * (256 * 256 + 512 * 256 + 768 * 256 + 1024 * 256)
    blocked = roofline.engine_work(n, c, s, 2, l1=False, host=False, hint=2)
    assert blocked.flops == 3 * per_gram
    # The same batch with one GEMM over the first 1,024 columns: 2 n (P - 1)^2 flops, one read
    # of those columns, one launch (and the same gemv).
    monkeypatch.setattr(roofline, "GRAM_COLUMN_BLOCK", 10_000)
    whole = roofline.engine_work(n, c, s, 2, l1=False, host=False, hint=2)
    assert whole.flops == 3 * 2 * n * (P - 1) * (P - 1)
    extra_reads = (256 + 512 + 768 + 1024 - 1024) / 1025
    assert blocked.bytes - whole.bytes == pytest.approx(3 * extra_reads * n * P * s)
    assert blocked.launches - whole.launches == 3 * 3
    assert blocked.syncs == whole.syncs


def test_float32_gram_in_two_column_blocks_from_128_to_255_columns(monkeypatch):
    # librh_cuda's float32 Gram (cuBLAS's SIMT SGEMM) of 128 to 255 GEMM columns: two blocks of
    # the upper triangle, the inner bound rounded down to a multiple of 64, as from 512 columns
    # in both dtypes; float64 keeps one block below 512, and so does float32 from 256.
    assert roofline.gram_column_blocks(127, 4) == [(0, 127)]
    assert roofline.gram_column_blocks(128, 4) == [(0, 64), (64, 128)]
    assert roofline.gram_column_blocks(129, 4) == [(0, 64), (64, 128)]
    assert roofline.gram_column_blocks(255, 4) == [(0, 64), (64, 255)]
    assert roofline.gram_column_blocks(256, 4) == [(0, 256)]
    assert roofline.gram_column_blocks(257, 4) == [(0, 256)]
    assert roofline.gram_column_blocks(511, 4) == [(0, 511)]
    # The standard wide batch, 4,096 x 257: one GEMM over 256 columns, chunks by the square (4 x
    # 4 tiles: 16 chunks of 256 rows), as in float64.
    assert roofline.gram_split(4_096, 257, 4) == roofline.gram_split(4_096, 257, 8) == (16, 256)
    assert roofline.gram_column_blocks(1025, 4) == roofline.gram_column_blocks(1025, 8)
    # From 512 columns both dtypes split alike, their chunks sized by the whole Gram.
    assert roofline.gram_column_blocks(600, 4) == roofline.gram_column_blocks(600, 8)
    assert roofline.gram_split(50_000, 600, 4) == roofline.gram_split(50_000, 600, 8)
    # Row chunks sized by the first block: at 262,144 x 129 one 64 x 64 tile, so 264 chunks,
    # capped at 256, of 1,024 rows; float64's 128 x 128 square is 4 tiles: 66 chunks of 3,972
    # rows (262,152 with 8 zeroed).
    n, c, P = 262_144, 128, 129
    assert roofline.gram_split(n, P, 4) == (256, 1024)
    assert roofline.gram_split(n, P, 8) == (66, 3972)
    # The large-stream float32 L1 batch (a heavy Gram, formed once): 2 n (64 * 64 + 128 * 64)
    # flops, 75% of the square's; the GEMMs read the rows' first 64 and 128 columns where one
    # GEMM read 128, one launch more, and no zeroed padding rows (one launch and 8 rows fewer).
    blocks = roofline.engine_work(n, c, 4, 20, l1=True, host=False, hint=4)
    assert blocks.flops == 2 * n * (64 * 64 + 128 * 64)
    monkeypatch.setattr(roofline, "GRAM_TRIANGLE_COLUMNS", 10_000)
    square = roofline.engine_work(n, c, 4, 20, l1=True, host=False, hint=4)
    assert square.flops == 2 * n * 128 * 128
    assert blocks.bytes - square.bytes == n * 64 * 4 - 8 * P * 4
    assert blocks.launches == square.launches
    assert blocks.syncs == square.syncs


def test_newton_with_a_heavy_cublas_gram_keeps_it_incrementally(monkeypatch):
    # 262,144 x 128 float64 Newton, 3 iterations, on an engine whose last update needed 4.
    # P = 129: above the fused row pass (128), within the one-block Cholesky (160); 2 n P^2 =
    # 8.7e9 > 2e9. Formed in full at every pass, the first chunk is 4 iterations (one
    # synchronisation, one iteration queued past the end whose GEMM runs in full). Kept
    # incrementally, the batch's first row pass forms the Gram (and records every row's weight,
    # 8 n bytes), each iteration's row pass flags the changed rows instead (reads the weights, 8
    # n; writes the flags, n), CUB's select reads the flags (n, two launches) and the changed
    # rows' update (counted at zero rows) is added by the host after each iteration's
    # synchronisation or, with DEVICE_GRAM_FLIPS, by two launches on the device in the same
    # chunks as the full Gram's.
    n, c, s, P = 262_144, 128, 8, 129
    k = 3
    above = dict(small_dense_max=128, cluster_cholesky_max=383)  # P past the one-block limit
    host_added = roofline.engine_work(n, c, s, k, l1=False, host=False, hint=4)
    host_above = roofline.engine_work(n, c, s, k, l1=False, host=False, hint=4, **above)
    monkeypatch.setattr(roofline, "DEVICE_GRAM_FLIPS", True)
    incremental = roofline.engine_work(n, c, s, k, l1=False, host=False, hint=4)
    # Above the one-block limit the host adds them whatever DEVICE_GRAM_FLIPS says.
    assert vars(roofline.engine_work(n, c, s, k, l1=False, host=False, hint=4,
                                     **above)) == vars(host_above)
    monkeypatch.setattr(roofline, "INCREMENTAL_GRAM", False)
    full = roofline.engine_work(n, c, s, k, l1=False, host=False, hint=4)
    assert roofline.chunk_sizes(l1=False, above_one_block=False, n=n, P=P, hint=4) == (4, 2)
    assert (full.syncs, incremental.syncs, host_added.syncs) == (1, 1, k)
    # P = 129 is one past two 64-column tiles: the GEMM forms 128 columns, the float64 row pass
    # the last beside X'u.
    one_gram = 2.0 * n * (P - 1) * (P - 1)
    assert full.flops == (1 + k + 1) * one_gram
    assert incremental.flops == one_gram
    # A Gram pass writes the scaled rows and the GEMM reads their first 128 columns (one column
    # block); the iteration queued past the end skips its row pass, but its GEMM reads the rows
    # again.
    scaled = n * P * s
    reads = n * (P - 1) * s
    # The iteration queued past the end reads the flags in CUB's select.
    assert full.bytes - incremental.bytes == pytest.approx(
        k * (scaled + reads) + reads - 8 * n - k * 10 * n - n)
    # An iteration: the Cholesky kernel, trials and select, the row pass (X'u and the Gram's last
    # column inside it), the GEMM (CUB's select's two launches and the update's two instead),
    # the gradient with the Gram's sum; both queue one iteration more than the solve needed.
    full_iteration = 1 + 2 + 1 + 1 + 1
    incremental_iteration = 1 + 2 + 1 + 4 + 1
    assert full.launches - incremental.launches == (k + 1) * (full_iteration -
                                                              incremental_iteration)
    # The host's way: no iteration queued past the end, the select alone in each, a commit after
    # every iteration.
    host_iteration = 1 + 2 + 1 + 2 + 1
    assert host_added.launches == incremental.launches - (k + 1) * incremental_iteration + (
        k * host_iteration + k - 1)


def _case(**kwargs):
    return synthetic.case(label="native_cuda", engine="native_cuda", **kwargs)


def test_batches_and_the_steady_chunk_hint():
    # reference: 100,000 rows in batches of 32,768 -> three full batches and 1,696 rows
    case = _case(samples=[0.01], shape="reference", iterations=[5, 2, 2, 2])
    assert roofline.batch_rows(case["shape"], "partial_fit") == [32768] * 3 + [1696]
    assert roofline.batch_rows(case["shape"], "fit") == [100_000]
    cold = roofline.case_floors(case, device())
    # cold: chunks 4 + 2 for 5 iterations, then the previous count (5, 2, 2) covers 2 at once
    assert cold["engine_work"]["syncs"] == 2 + 1 + 1 + 1
    assert cold["ideal_work"]["syncs"] == 4
    steady = roofline.case_floors({**case, "lifecycle": "steady"}, device())
    # steady: the primed engine last needed 2 (the final batch), so 2 + 2 + 2 for 5
    assert steady["engine_work"]["syncs"] == 3 + 1 + 1 + 1
    with pytest.raises(ValueError, match="3 iteration counts for 4 batches"):
        roofline.case_floors({**case, "iterations": [1, 2, 3]}, device())


def _record():
    cases = [
        _case(samples=[0.002, 0.0021, 0.0019], iterations=[6]),
        _case(samples=[0.004, 0.004, 0.0041], penalty="l1", transport="device", iterations=[8]),
        _case(samples=[0.02, 0.021, 0.019], shape="wide", iterations=[7, 3, 2, 2]),
        synthetic.case(label="cupy", engine="cupy", samples=[0.05, 0.05, 0.05]),
    ]
    return synthetic.build([("cupy", "cupy"), ("native_cuda", "native_cuda")], cases)


def test_table_from_a_valid_record(tmp_path):
    pytest.importorskip("jsonschema")
    data = _record()
    assert validate.problems(data) == []
    record.write(data, tmp_path / "r.json")
    (tmp_path / "d.json").write_text(json.dumps(device_json()))
    out, js = tmp_path / "table.md", tmp_path / "table.json"
    assert roofline.main(["--record", str(tmp_path / "r.json"), "--device",
                          str(tmp_path / "d.json"), "--out", str(out), "--json", str(js)]) == 0
    text = out.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "case" not in line]
    assert len(rows) == 3  # the cupy case is not tabled
    assert rows[0].startswith("| latency 4,096x16 (4,096) float64 none cold partial_fit host")
    assert "synthetic GPU" in text and "ideal" in text and "engine" in text
    payload = json.loads(js.read_text())
    first = payload["cases"][0]
    # the latency case: 6 iterations, ideal = 6 reads + 6 Grams + 6 launches + 1 sync + PCIe
    batch = 4096 * 17 * 8
    ideal = (6 * batch / 1e12 + 6 * 2 * 4096 * 289 / 1e13 + 6 * 2e-6 + 1e-5 + batch / 5e10)
    assert first["ideal_s"] == pytest.approx(ideal)
    assert first["achieved_s"] == 0.002
    assert first["achieved_over_ideal"] == pytest.approx(0.002 / ideal)
    assert payload["device"]["fingerprint"]["name"] == "synthetic GPU"
    # the wide case (P = 257) goes through the cluster Cholesky, named among the causes of the
    # remaining gap; with a lower limit, through cuSOLVER
    assert "cluster Cholesky latency" in payload["cases"][2]["gap"]
    assert roofline.main(["--record", str(tmp_path / "r.json"), "--device",
                          str(tmp_path / "d.json"), "--cluster-cholesky-max", "256",
                          "--out", str(out), "--json", str(js)]) == 0
    payload = json.loads(js.read_text())
    assert "cuSOLVER latency" in payload["cases"][2]["gap"]
    assert payload["cluster_cholesky_max"] == 256


def test_host_input_against_its_device_twin_and_the_copy_floor(tmp_path):
    pytest.importorskip("jsonschema")
    # latency 4,096 x 16 float64 none on both transports (3.0 and 2.0 ms), and an L1 host case
    # without a device twin: one pair. The host adds 1.0 ms; its copy floor is the batch's
    # bytes, 4,096 * 17 * 8, over the pinned rate of 5e10 B/s.
    cases = [_case(samples=[0.003, 0.003, 0.003], iterations=[6]),
             _case(samples=[0.002, 0.002, 0.002], transport="device", iterations=[6]),
             _case(samples=[0.004, 0.004, 0.004], penalty="l1", iterations=[8])]
    data = synthetic.build([("native_cuda", "native_cuda")], cases)
    record.write(data, tmp_path / "r.json")
    (tmp_path / "d.json").write_text(json.dumps(device_json()))
    out, js = tmp_path / "table.md", tmp_path / "table.json"
    assert roofline.main(["--record", str(tmp_path / "r.json"), "--device",
                          str(tmp_path / "d.json"), "--out", str(out), "--json", str(js)]) == 0
    floor = 4096 * 17 * 8 / 5e10
    (pair,) = json.loads(js.read_text())["host_transfer"]
    assert (pair["shape"], pair["penalty"]) == ("latency", "none")
    assert pair["extra_s"] == pytest.approx(0.001)
    assert pair["transfer_floor_s"] == pytest.approx(floor)
    assert pair["extra_over_floor"] == pytest.approx(0.001 / floor)
    text = out.read_text()
    assert "## Host input over device input" in text
    assert f"| {0.001 / floor:.2f} |" in text
    # no device twin at all: no such section
    lone = synthetic.build([("native_cuda", "native_cuda")], [cases[0], cases[2]])
    record.write(lone, tmp_path / "lone.json")
    assert roofline.main(["--record", str(tmp_path / "lone.json"), "--device",
                          str(tmp_path / "d.json"), "--out", str(out)]) == 0
    assert "Host input over device input" not in out.read_text()


@pytest.mark.parametrize("overrides, bound", [
    ({"launch_s": 1e-3}, "launch-bound"),
    ({"sync_s": 1.0}, "synchronisation-bound"),
    ({"bandwidth_bytes_per_s": 1e6}, "bandwidth-bound"),
    ({"gemm_float64_flops_per_s": 1e6}, "Gram-bound"),
    ({"host_to_device_bytes_per_s": 1e3}, "PCIe-bound"),
])
def test_gap_names_the_dominant_term(overrides, bound):
    case = _case(samples=[0.002], iterations=[6])
    [row] = roofline.table_rows([case], device(**overrides))
    assert row["gap"].startswith(bound)
    terms = row["engine_terms_s"]
    assert max(roofline.TERMS, key=terms.get) == {
        "launch-bound": "launch", "synchronisation-bound": "sync", "bandwidth-bound": "memory",
        "Gram-bound": "gram", "PCIe-bound": "transfer"}[bound]


def test_gap_at_or_beyond_the_engine_floor():
    fast = _case(samples=[1e-9], iterations=[6])
    [row] = roofline.table_rows([fast], device())
    assert row["gap"].endswith("at the engine floor")
    slow = _case(samples=[1.0], iterations=[6])
    [row] = roofline.table_rows([slow], device())
    assert "beyond it" in row["gap"] and "engine creation" in row["gap"]
    # host input: the staging copy is named first; device input never names it
    assert "beyond it (100%: the host's copy of pageable rows into pinned chunks, " in row["gap"]
    [row] = roofline.table_rows([{**slow, "transport": "device"}], device())
    assert "beyond it" in row["gap"] and "pageable" not in row["gap"]


def test_bad_inputs_are_refused_with_a_reason(tmp_path, capsys):
    record.write(_record(), tmp_path / "r.json")
    bad = device_json()
    bad["model"]["launch_s"] = -1
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    assert roofline.main(["--record", str(tmp_path / "r.json"), "--device",
                          str(tmp_path / "bad.json")]) == 2
    assert "'launch_s' = -1 is not a positive finite number" in capsys.readouterr().err
    (tmp_path / "other.json").write_text(json.dumps({"schema": "x"}))
    assert roofline.main(["--record", str(tmp_path / "r.json"), "--device",
                          str(tmp_path / "other.json")]) == 2
    assert "not a renewable-huber-device-constants v1 file" in capsys.readouterr().err
    (tmp_path / "d.json").write_text(json.dumps(device_json()))
    assert roofline.main(["--record", str(tmp_path / "r.json"), "--device",
                          str(tmp_path / "d.json"), "--engine", "native_cpu"]) == 2
    assert "no case of engine 'native_cpu'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        roofline.main(["--record", str(tmp_path / "r.json")])  # no --device
    with pytest.raises(SystemExit):
        roofline.main([])  # neither mode


def test_measure_device_without_cupy_says_what_is_missing(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    out = tmp_path / "device.json"
    assert roofline.main(["--measure-device", str(out)]) == 2
    assert "--measure-device needs CuPy" in capsys.readouterr().err
    assert not out.exists()


def test_measure_device_on_a_gpu(tmp_path):
    cp = pytest.importorskip("cupy", reason="CuPy is not installed: no device to measure")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except cp.cuda.runtime.CUDARuntimeError as exc:
        pytest.skip(f"no usable CUDA device: {exc}")
    data = roofline.measure_device(repeats=2, bandwidth_bytes=64 << 20, gemm_size=512,
                                   launches=50, copy_bytes=8 << 20)
    constants = roofline.DeviceConstants.from_json(data)  # every model value positive, finite
    assert constants.sync >= 0 and data["fingerprint"]["name"]
    assert data["fingerprint"]["compute_capability"].count(".") == 1


def test_measure_device_failure_is_reported(tmp_path, monkeypatch, capsys):
    def no_device(**_):
        raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")

    monkeypatch.setattr(roofline, "measure_device", no_device)
    out = tmp_path / "device.json"
    assert roofline.main(["--measure-device", str(out)]) == 2
    assert "measuring the device failed: RuntimeError: cudaErrorNoDevice" in (
        capsys.readouterr().err)
    assert not out.exists()
