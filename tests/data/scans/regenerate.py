"""How the files in this folder were made (run by hand; CI only reads the results).

Needs the two reference encoders/decoders built outside the repo:
  SPZREF: the nianticlabs/spz C++ library (commit 21715c3) linked with the small driver
          spzref.cpp next to this script (encode: PLY -> .spz in RUB axes, format version N;
          decode: .spz -> PLY converted to RDF); g++ -O2 -std=c++17 ... -lz -lzstd
  SPLAT_TRANSFORM: the npm package @playcanvas/splat-transform 3.7.0 (compressed PLY
          encoder and decoder: `splat-transform in.ply out.compressed.ply`, and back)
Usage: python tests/data/scans/regenerate.py SPZREF SPLAT_TRANSFORM SOURCES_DIR
  SOURCES_DIR holds biker.spz (playcanvas/engine) and minimal-v{2,3,4}.spz, minimal.splat
  (playcanvas/splat-transform), see README.md.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
ROWS = 300  # reference rows kept per file (every n // ROWS-th Gaussian)


def reference_columns(ply: Path) -> dict[str, np.ndarray]:
    from plyfile import PlyData

    v = PlyData.read(str(ply))["vertex"].data
    names = [n for n in v.dtype.names if n not in ("nx", "ny", "nz")]
    return {n: np.asarray(v[n], np.float32) for n in names}


def rows_of(n: int) -> np.ndarray:
    return np.arange(0, n, max(1, n // ROWS))


def main(spzref: str, splat_transform: str, sources: str) -> None:
    sys.path.insert(0, str(HERE.parents[2]))
    from bench.scene.ply import read_ply, write_ply
    from bench.scene.sample import sample_background

    src = Path(sources)
    refs: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        room = tmp / "room.ply"
        write_ply(room, sample_background(seed=1, n_gaussians=3000))
        # sample room through the reference encoders (round-trip + decode checks)
        for version in (2, 3, 4):
            out = HERE / f"room-v{version}.spz"
            subprocess.run([spzref, "encode", room, out, str(version)], check=True)
        subprocess.run([splat_transform, "-q", "-w", room, HERE / "room.compressed.ply"],
                       check=True)
        # the public biker scan, every 4th Gaussian, re-encoded by the reference encoder
        full = tmp / "biker.ply"
        subprocess.run([spzref, "decode", src / "biker.spz", full], check=True)
        biker = read_ply(full, drop_nonfinite=True)
        write_ply(tmp / "biker-sub4.ply", biker.subset(np.arange(0, len(biker), 4)))
        subprocess.run([spzref, "encode", tmp / "biker-sub4.ply", HERE / "biker-sub4.spz", "4"],
                       check=True)
        for name in ("minimal-v2.spz", "minimal-v3.spz", "minimal-v4.spz", "minimal.splat"):
            shutil.copy(src / name, HERE / name)
        # reference decoder values
        for path in sorted(HERE.glob("*.spz")):
            decoded = tmp / (path.stem + ".ref.ply")
            subprocess.run([spzref, "decode", path, decoded], check=True)
            cols = reference_columns(decoded)
            rows = rows_of(len(next(iter(cols.values()))))
            refs.update({f"{path.name}:{k}": v[rows] for k, v in cols.items()})
            refs[f"{path.name}:rows"] = rows
        for path in sorted(HERE.glob("*.compressed.ply")):
            decoded = tmp / (path.name + ".ref.ply")
            subprocess.run([splat_transform, "-q", "-w", path, decoded], check=True)
            cols = reference_columns(decoded)
            rows = rows_of(len(next(iter(cols.values()))))
            refs.update({f"{path.name}:{k}": v[rows] for k, v in cols.items()})
            refs[f"{path.name}:rows"] = rows
    np.savez_compressed(HERE / "reference_values.npz", **refs)


if __name__ == "__main__":
    main(*sys.argv[1:4])
