"""benchmarks/fingerprint.py's sample of the CPUs other work keeps busy, from /proc/stat texts
written here (the busy share worked out by hand below)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import fingerprint  # noqa: E402

# user nice system idle iowait irq softirq steal guest guest_nice
BEFORE = "cpu  100 10 50 800 40 5 5 0 7 0\ncpu0 50 5 25 400 20 2 3 0 3 0\nintr 1 2 3\n"
AFTER = "cpu  160 10 80 1500 140 5 15 90 9 0\ncpu0 80 5 40 750 70 2 8 45 4 0\nintr 4 5 6\n"


def test_cpu_jiffies_counts_idle_and_iowait_as_idle_and_leaves_guest_out():
    # Busy: user + nice + system + irq + softirq + steal; total adds idle and iowait.
    assert fingerprint.cpu_jiffies(BEFORE) == (100 + 10 + 50 + 5 + 5 + 0, 1010)
    assert fingerprint.cpu_jiffies(AFTER) == (160 + 10 + 80 + 5 + 15 + 90, 2000)
    assert fingerprint.cpu_jiffies("cpu0 1 2 3 4 5 6 7 8\n") is None


def test_busy_cpus_is_the_busy_share_of_the_ticks_times_the_cpus():
    before, after = fingerprint.cpu_jiffies(BEFORE), fingerprint.cpu_jiffies(AFTER)
    # 190 of 990 ticks busy (steal included: the hypervisor ran others), on 4 CPUs.
    assert fingerprint.busy_cpus(before, after, 4) == 4 * 190 / 990
    assert fingerprint.busy_cpus(before, before, 4) is None  # no ticks between the readings


def test_cpu_busy_sample_of_this_host_and_its_reasons(tmp_path):
    sample = fingerprint.cpu_busy_sample(0.2)  # 20 or more clock ticks per CPU at 100 Hz
    assert sample["window_s"] == 0.2
    if Path("/proc/stat").exists():
        assert 0.0 <= sample["busy_cpus"] <= (fingerprint.os.cpu_count() or 1)
    missing = fingerprint.cpu_busy_sample(0.0, tmp_path / "stat")
    assert missing["busy_cpus"] is None and str(tmp_path / "stat") in missing["reason"]
    (tmp_path / "stat").write_text("intr 1 2 3\n")
    assert fingerprint.cpu_busy_sample(0.0, tmp_path / "stat")["reason"].endswith(
        "has no cpu line")
    (tmp_path / "stat").write_text(BEFORE)  # the same reading twice: no ticks to share
    assert fingerprint.cpu_busy_sample(0.0, tmp_path / "stat") == {"window_s": 0.0,
                                                                   "busy_cpus": None}
