"""benchmarks/micro/cluster_cholesky_phases.py's reading of the kernel's phase stamps, on lines
written here in the kernel's format (engines/cuda/src/cluster_cholesky.cu, RH_CUDA_CLUSTER_PHASES)
with lengths worked out by hand below."""

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.micro import cluster_cholesky_phases as phases  # noqa: E402

# P = 257: 9 tile rows on 8 blocks, so 8 steps and 9 back-substitution steps.
STEPS = 8
STAMPED = ([0, 1, 2] + list(range(phases.FIRST_STEP, phases.FIRST_STEP + 5 * STEPS))
           + [phases.LOOP_END, phases.VERDICT]
           + list(range(phases.FIRST_BACK, phases.FIRST_BACK + STEPS + 1)) + [phases.END])


def stamp(phase: int, rank: int) -> int:
    """1,000 cycles per phase index plus 10 per rank; a copy's end another 100 per rank."""
    cycles = 1000 * phase + 10 * rank if phase else 0
    if phases.FIRST_STEP <= phase < phases.LOOP_END and (phase - phases.FIRST_STEP) % 5 == 3:
        cycles += 100 * rank
    return cycles


def kernel_lines(launch: int, ranks=range(8), P=257, blocks=8) -> list[str]:
    lines = []
    for rank in ranks:
        for first in range(0, phases.END + 1, 8):
            values = [stamp(e, rank) if e in STAMPED else -1 for e in range(first, first + 8)]
            lines.append(f"RH_CLUSTER_PHASES launch {launch} P {P} blocks {blocks} rank {rank} "
                         f"first {first}: " + " ".join(map(str, values)))
    return lines


def test_read_stamps_keeps_reached_phases_and_skips_other_output():
    text = "\n".join(["wide float32 none: 17 iterations", *kernel_lines(0), "unrelated line"])
    launches = phases.read_stamps(text)
    assert list(launches) == [0]
    entry = launches[0]
    assert (entry["P"], entry["blocks"]) == (257, 8)
    assert sorted(entry["ranks"]) == list(range(8))
    assert sorted(entry["ranks"][3]) == STAMPED  # the -1 stamps are left out
    assert entry["ranks"][3][phases.VERDICT] == 1000 * phases.VERDICT + 30


def test_summary_lengths():
    entry = phases.read_stamps("\n".join(kernel_lines(0)))[0]
    rows = dict(phases.summary(entry))
    assert rows["assembly and first factor (to step 0's top)"] == 3000
    assert rows["step 0"] == 5000  # phase 3 to phase 8 on block 0
    assert rows["step 7"] == (phases.LOOP_END - (phases.FIRST_STEP + 35)) * 1000
    # copied - mid = 1,000 + 100 r - 0: rank 7's 1,700 is the longest.
    assert rows["step 4: longest copy of panel tiles"] == 1700
    assert rows["steps"] == (phases.LOOP_END - phases.FIRST_STEP) * 1000
    assert rows["back substitution (verdict to end)"] == (phases.END - phases.VERDICT) * 1000
    assert rows["whole kernel"] == phases.END * 1000


def test_table_takes_the_middle_launch_and_names_phases():
    text = "\n".join(kernel_lines(0) + kernel_lines(1) + kernel_lines(2))
    out = phases.table(text)
    assert out[0].startswith("launch 1 of 3: P = 257 on 8 blocks")
    names = [line[:34].strip() for line in out[2:2 + len(STAMPED)]]  # names take 34 columns
    assert names[:4] == ["start", "assembled", "first factor", "step 0 top"]
    assert names[3 + 5 * STEPS - 1] == "step 7 updated"
    assert names[-1] == "end" and names[-2] == f"back step {STEPS}"
    # Rank 2's cell of the verdict row: 1,000 x VERDICT + 20.
    verdict = out[2 + names.index("verdict")].split()
    assert int(verdict[1 + 2]) == 1000 * phases.VERDICT + 20
    assert phases.table(text, launch=2)[0].startswith("launch 2 of 3")


def test_refusals_name_the_problem():
    with pytest.raises(ValueError, match="RH_CUDA_CLUSTER_PHASES=ON"):
        phases.read_stamps("no stamps here")
    with pytest.raises(ValueError, match=r"no launch 5: the log has launches \[0\]"):
        phases.table("\n".join(kernel_lines(0)), launch=5)
    mixed = kernel_lines(0, ranks=[0]) + kernel_lines(0, ranks=[1], P=289, blocks=8)
    with pytest.raises(ValueError, match="two shapes"):
        phases.read_stamps("\n".join(mixed))
    without_block_0 = phases.read_stamps("\n".join(kernel_lines(0, ranks=[1, 2])))[0]
    with pytest.raises(ValueError, match="block 0 printed no stamps"):
        phases.summary(without_block_0)


def test_phase_names_cover_the_kernel_layout():
    assert phases.phase_name(phases.FIRST_STEP + 5 * 14 + 4) == "step 14 updated"
    assert phases.phase_name(phases.LOOP_END) == "steps end"
    assert phases.phase_name(phases.FIRST_BACK + 15) == "back step 15"
    with pytest.raises(ValueError):
        phases.phase_name(phases.END + 1)


def test_layout_matches_the_kernels_constants():
    """The script's phase indices are the kernel's kPhase* constants (read from its source)."""
    source = (Path(__file__).resolve().parents[2] / "engines/cuda/src/cluster_cholesky.cu"
              ).read_text()
    names = {}
    for name in ("kMaxTiles", "kPhaseAssembled", "kPhaseFirstFactor", "kPhaseStep",
                 "kPhaseLoopEnd", "kPhaseVerdict", "kPhaseBack", "kPhaseEnd"):
        found = re.search(rf"constexpr int {name} = ([^;]+);", source)
        assert found is not None, name
        names[name] = eval(found.group(1), {}, dict(names))  # arithmetic on earlier names
    assert names["kMaxTiles"] == phases.MAX_TILES
    assert (names["kPhaseAssembled"], names["kPhaseFirstFactor"]) == (1, 2)
    assert names["kPhaseStep"] == phases.FIRST_STEP
    assert names["kPhaseLoopEnd"] == phases.LOOP_END
    assert names["kPhaseVerdict"] == phases.VERDICT
    assert names["kPhaseBack"] == phases.FIRST_BACK
    assert names["kPhaseEnd"] == phases.END
    # Each step stamps kPhaseStep + 5 step + 0..4, in STEP_PHASES's order.
    offsets = re.findall(r"RH_CLUSTER_PHASE\(kPhaseStep \+ 5 \* step(?: \+ (\d))?\)", source)
    assert [int(o or 0) for o in offsets] == list(range(len(phases.STEP_PHASES)))
