"""Prints the site-packages folders that hold this interpreter's NumPy and CuPy (and CuPy's
helpers), one per line: a .pth file of them lets a clean virtual environment on a host without
network import the host's copies (packaging/smoke_wheel.sh --offline, the GPU runbook's stage 1
wheel smoke test)."""

import importlib.util
import os

folders = []
for name in ("numpy", "cupy", "cupy_backends", "fastrlock"):
    spec = importlib.util.find_spec(name)
    if spec and spec.origin:
        folder = os.path.dirname(os.path.dirname(spec.origin))
        if folder not in folders:
            folders.append(folder)
print("\n".join(folders))
