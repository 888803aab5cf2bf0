"""Checks a built renewable-huber wheel before anyone installs it.

    python packaging/check_wheel.py --kind base [--max-glibc 2.28] [--auditwheel] WHEEL
    python packaging/check_wheel.py --kind cuda --cuda-major 13 [--auditwheel] WHEEL

What it checks (every failure is listed, exit status 1; 0 when all hold):
- the file name: py3-none-<platform>, a manylinux tag on Linux no newer than --max-glibc;
- the members a kind must carry, and must not: the base wheel has the Python package, py.typed,
  librh_cpu, the header, the CMake package, the conformance data and no librh_cuda; a CUDA wheel
  has librh_cuda (and its CMake targets file) and nothing of the base wheel's, so installing it
  on top never overwrites a file another distribution owns, and no bundled cuBLAS, cuSOLVER or
  CUDA runtime (those come from NVIDIA's wheels);
- the metadata: licence file, project URLs https when present, the `renewable-huber` entry
  point (base), the NVIDIA dependencies of the CUDA major and the exact base version (CUDA);
- every ELF file (with readelf): each NEEDED library is bundled in the wheel, a system library
  every manylinux platform has, or (CUDA wheel) one of NVIDIA's wheels; no GLIBC_ symbol version
  newer than --max-glibc; librh_cuda's RUNPATH reaches NVIDIA's wheels from renewable_huber/_lib;
- with --auditwheel, that `auditwheel show` names a platform tag the file name carries.
"""

from __future__ import annotations

import argparse
import email.parser
import fnmatch
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "renewable_huber"
ABI_MAJOR = 2
BASE_MEMBERS = (
    f"{PACKAGE}/__init__.py",
    f"{PACKAGE}/py.typed",
    f"{PACKAGE}/cli.py",
    f"{PACKAGE}/include/rh_cuda.h",
    f"{PACKAGE}/include/rh_cuda_row_statistics.h",
    f"{PACKAGE}/cmake/renewable_huber/renewable_huberConfig.cmake",
    f"{PACKAGE}/cmake/renewable_huber/renewable_huberConfigVersion.cmake",
    f"{PACKAGE}/cmake/renewable_huber/renewable_huber_rh_cpu_targets.cmake",
    f"{PACKAGE}/conformance/data/native_core_v1.json",
    f"{PACKAGE}/conformance/data/native_core_v2.json",
    f"{PACKAGE}/conformance/data/native_core_v3.json",
    f"{PACKAGE}/conformance/data/native_core_v4.json",
    f"{PACKAGE}/conformance/data/negative_cases.json",
    f"{PACKAGE}/conformance/data/tolerances.json",
)
CUDA_MEMBERS = (f"{PACKAGE}/cmake/renewable_huber/renewable_huber_rh_cuda_targets.cmake",)
# Libraries every manylinux platform provides (PEP 600's reference list, the part an engine can
# need); anything else must be bundled.
SYSTEM_LIBRARIES = (
    "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "libgcc_s.so.1",
    "libstdc++.so.6", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "ld64.so.2",
)
# NVIDIA's wheels, per CUDA major: what librh_cuda may need from them, where they put it
# (relative to site-packages) and the distributions that provide it.
NVIDIA = {
    12: {
        "needed": ("libcublas.so.12", "libcublasLt.so.12", "libcusolver.so.11"),
        "dirs": ("nvidia/cublas/lib", "nvidia/cusolver/lib"),
        "requires": ("nvidia-cublas-cu12", "nvidia-cusolver-cu12"),
    },
    13: {
        "needed": ("libcublas.so.13", "libcublasLt.so.13", "libcusolver.so.12"),
        "dirs": ("nvidia/cu13/lib",),
        "requires": ("nvidia-cublas", "nvidia-cusolver"),
    },
}
# Never bundled into a CUDA wheel: NVIDIA's own libraries (and the driver, which no wheel may
# carry).
NVIDIA_PATTERNS = ("libcublas*", "libcusolver*", "libcusparse*", "libnvJitLink*", "libcudart*",
                   "libnvrtc*", "libcuda.so*")


@dataclass
class Report:
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def require(self, condition: bool, message: str) -> bool:
        if not condition:
            self.failures.append(message)
        return condition


@dataclass
class ElfInfo:
    needed: list[str]
    runpath: list[str]
    glibc: tuple[int, ...] | None  # the newest GLIBC_x.y version a symbol needs


def parse_version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def wheel_tags(filename: str) -> tuple[str, str, str, list[str]]:
    """(name, version, python.abi, platform tags) from a wheel file name."""
    stem = filename[: -len(".whl")] if filename.endswith(".whl") else filename
    parts = stem.split("-")
    if len(parts) not in (5, 6):
        raise ValueError(f"{filename} is not a wheel file name (name-version-py-abi-platform)")
    return parts[0], parts[1], f"{parts[-3]}-{parts[-2]}", parts[-1].split(".")


def manylinux_glibc(tag: str) -> tuple[int, int] | None:
    """The glibc a manylinux tag promises (legacy aliases included); None for other tags."""
    legacy = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
    for alias, version in legacy.items():
        if tag.startswith(alias + "_"):
            return version
    match = re.match(r"manylinux_(\d+)_(\d+)_", tag)
    return (int(match.group(1)), int(match.group(2))) if match else None


def read_elf(path: Path) -> ElfInfo:
    dynamic = subprocess.run(["readelf", "-dW", str(path)], capture_output=True, text=True,
                             check=True).stdout
    needed = re.findall(r"\(NEEDED\).*\[(.+?)\]", dynamic)
    runpath: list[str] = []
    for entry in re.findall(r"\((?:RUNPATH|RPATH)\).*\[(.*?)\]", dynamic):
        runpath.extend(p for p in entry.split(":") if p)
    symbols = subprocess.run(["readelf", "--dyn-syms", "-W", str(path)], capture_output=True,
                             text=True, check=True).stdout
    versions = [parse_version(v) for v in re.findall(r"@GLIBC_(\d+(?:\.\d+)+)", symbols)]
    return ElfInfo(needed, runpath, max(versions) if versions else None)


def is_elf(data: bytes) -> bool:
    return data[:4] == b"\x7fELF"


def check_metadata(archive: zipfile.ZipFile, names: list[str], kind: str, version: str,
                   cuda_major: int | None, report: Report) -> None:
    dist_info = sorted({n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")})
    if not report.require(len(dist_info) == 1, f"expected one .dist-info, found {dist_info}"):
        return
    meta_name = f"{dist_info[0]}/METADATA"
    if not report.require(meta_name in names, f"{meta_name} is missing"):
        return
    metadata = email.parser.Parser().parsestr(archive.read(meta_name).decode())
    licences = [n for n in names if n.startswith(dist_info[0]) and "LICENSE" in n.split("/")[-1]]
    report.require(bool(licences), "no LICENSE file in the .dist-info folder")
    for entry in metadata.get_all("Project-URL") or []:
        url = entry.split(",", 1)[-1].strip()
        report.require(url.startswith("https://"), f"Project-URL {entry!r} is not an https link")
    requires = metadata.get_all("Requires-Dist") or []
    base_requires = [r for r in requires if "extra ==" not in r]
    if kind == "base":
        report.require(any(r.replace(" ", "").startswith("numpy") for r in base_requires),
                       "the base wheel does not require numpy")
        report.require(not any(r.startswith("nvidia") for r in base_requires),
                       "the base wheel requires NVIDIA packages outside an extra")
        entry_points = f"{dist_info[0]}/entry_points.txt"
        report.require(entry_points in names and b"renewable-huber" in archive.read(entry_points),
                       "the renewable-huber command is not declared (entry_points.txt)")
        for major in NVIDIA:
            report.require(any(f"renewable-huber-cuda{major}=={version}" in r.replace(" ", "")
                               and f"extra == \"cuda{major}\"" in r for r in requires),
                           f"extra cuda{major} does not require renewable-huber-cuda{major}=="
                           f"{version}")
    else:
        report.require(any(r.replace(" ", "") == f"renewable-huber=={version}"
                           for r in base_requires),
                       f"the CUDA wheel does not require renewable-huber=={version}")
        for dist in NVIDIA[cuda_major]["requires"]:
            report.require(any(re.match(rf"{re.escape(dist)}\s*[<>=!~(]", r) or r == dist
                               for r in base_requires),
                           f"the CUDA wheel does not require {dist}")


def check_members(names: list[str], kind: str, report: Report) -> None:
    lib_dir = f"{PACKAGE}/_lib/"
    cpu, cuda = f"{lib_dir}librh_cpu.so.{ABI_MAJOR}", f"{lib_dir}librh_cuda.so.{ABI_MAJOR}"
    if kind == "base":
        for member in (*BASE_MEMBERS, cpu):
            report.require(member in names, f"{member} is missing")
        report.require(cuda not in names, f"{cuda} is in the base wheel (CUDA wheels are separate)")
    else:
        for member in (*CUDA_MEMBERS, cuda):
            report.require(member in names, f"{member} is missing")
        owned = [n for n in names if n in BASE_MEMBERS or n == cpu
                 or (n.startswith(f"{PACKAGE}/") and n.endswith(".py"))]
        report.require(not owned, f"the CUDA wheel carries files of the base wheel: {owned}")
        bundled = [n for n in names
                   if any(fnmatch.fnmatch(n.split("/")[-1], p) for p in NVIDIA_PATTERNS)]
        report.require(not bundled, f"NVIDIA libraries bundled into the CUDA wheel: {bundled}")


def check_elves(archive: zipfile.ZipFile, names: list[str], kind: str,
                cuda_major: int | None, max_glibc: tuple[int, ...] | None,
                report: Report) -> None:
    bundled_sonames = {n.split("/")[-1] for n in names}
    with tempfile.TemporaryDirectory() as scratch:
        for name in names:
            data = archive.read(name)
            if not is_elf(data):
                continue
            path = Path(scratch) / name.replace("/", "_")
            path.write_bytes(data)
            info = read_elf(path)
            glibc = ".".join(map(str, info.glibc)) if info.glibc else "none"
            report.notes.append(f"{name}: NEEDED {', '.join(info.needed)}; RUNPATH "
                                f"{':'.join(info.runpath) or '-'}; newest GLIBC symbol {glibc}")
            allowed = set(SYSTEM_LIBRARIES) | bundled_sonames
            if kind == "cuda":
                allowed |= set(NVIDIA[cuda_major]["needed"])
            for library in info.needed:
                report.require(library in allowed,
                               f"{name} needs {library}, which is neither bundled nor a "
                               "manylinux system library"
                               + (" nor an NVIDIA wheel library" if kind == "cuda" else ""))
            if max_glibc is not None and info.glibc is not None:
                report.require(info.glibc <= max_glibc,
                               f"{name} needs GLIBC_{glibc}, newer than the allowed "
                               f"{'.'.join(map(str, max_glibc))}")
            if kind == "cuda" and name.endswith(f"librh_cuda.so.{ABI_MAJOR}"):
                nvidia = NVIDIA[cuda_major]
                for library in ("libcublas", "libcusolver"):
                    report.require(any(n.startswith(library + ".so.") and n in nvidia["needed"]
                                       for n in info.needed),
                                   f"{name} does not need {library} of CUDA {cuda_major}")
                for folder in nvidia["dirs"]:
                    report.require(f"$ORIGIN/../../{folder}" in info.runpath,
                                   f"{name}: RUNPATH {info.runpath} lacks $ORIGIN/../../{folder}")
                absolute = [p for p in info.runpath if not p.startswith("$ORIGIN")]
                report.require(not absolute,
                               f"{name}: RUNPATH has build-machine paths {absolute}")


def check_auditwheel(wheel: Path, kind: str, platforms: list[str], report: Report) -> None:
    """`auditwheel show` must name a tag the file carries. For a CUDA wheel its overall verdict
    is linux_* by design (show has no --exclude: NVIDIA's libraries, which the wheel requires
    instead of bundling, count as unbundled), so the tag its symbol versions allow is used."""
    command = shutil.which("auditwheel")
    argv = [command] if command else [sys.executable, "-m", "auditwheel"]
    shown = subprocess.run([*argv, "show", str(wheel)], capture_output=True, text=True)
    text = " ".join((shown.stdout + shown.stderr).split())
    pattern = (r'consistent with the following platform tag: "([^"]+)"' if kind == "base"
               else r'constrains the platform tag to "([^"]+)"')
    match = re.search(pattern, text)
    if not report.require(shown.returncode == 0 and match is not None,
                          f"auditwheel show found no platform tag: {text[:400]}"):
        return
    report.notes.append(f"auditwheel show: {match.group(1)}")
    report.require(match.group(1) in platforms,
                   f"auditwheel show says {match.group(1)}, the file name says {platforms}")


def check_wheel(wheel: Path, kind: str, cuda_major: int | None = None,
                max_glibc: str | None = None, auditwheel: bool = False) -> Report:
    report = Report()
    name, version, python_abi, platforms = wheel_tags(wheel.name)
    expected_name = PACKAGE if kind == "base" else f"{PACKAGE}_cuda{cuda_major}"
    report.require(name == expected_name, f"distribution {name}, expected {expected_name}")
    report.require(python_abi == "py3-none", f"tags {python_abi}, expected py3-none (ctypes)")
    limit = parse_version(max_glibc) if max_glibc else None
    for tag in platforms:
        if tag.startswith("linux_"):
            report.failures.append(f"platform tag {tag}: not repaired (no manylinux tag)")
        glibc = manylinux_glibc(tag)
        if glibc is not None and limit is not None:
            report.require(glibc <= limit, f"platform tag {tag} needs glibc "
                           f"{glibc[0]}.{glibc[1]}, newer than {max_glibc}")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        check_members(names, kind, report)
        check_metadata(archive, names, kind, version, cuda_major, report)
        check_elves(archive, names, kind, cuda_major, limit, report)
    if auditwheel:
        check_auditwheel(wheel, kind, platforms, report)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--kind", choices=("base", "cuda"), required=True)
    parser.add_argument("--cuda-major", type=int, choices=sorted(NVIDIA))
    parser.add_argument("--max-glibc", metavar="X.Y", help="newest glibc the wheel may need")
    parser.add_argument("--auditwheel", action="store_true",
                        help="also require `auditwheel show` to confirm the platform tag")
    args = parser.parse_args(argv)
    if args.kind == "cuda" and args.cuda_major is None:
        parser.error("--kind cuda needs --cuda-major")
    if not args.wheel.is_file():
        parser.error(f"{args.wheel}: no such file")
    report = check_wheel(args.wheel, args.kind, args.cuda_major, args.max_glibc, args.auditwheel)
    print(f"{args.wheel.name}:")
    for note in report.notes:
        print(f"  {note}")
    for failure in report.failures:
        print(f"  FAIL {failure}")
    print(f"  {'OK' if not report.failures else f'{len(report.failures)} problem(s)'}")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
