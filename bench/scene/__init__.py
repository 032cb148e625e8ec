"""Gaussian scene model, PLY I/O, scene bundles and cameras.

Main entry points::

    from bench.scene import read_ply, write_ply, load_scene, save_scene
    scene = load_scene("scenes/room")          # background in the world frame
"""

from bench.scene.bundle import KeepoutBox, SceneBundle, TableSpec, load_scene, save_scene
from bench.scene.gaussians import SH_C0, GaussianSplats
from bench.scene.ply import read_gaussians, read_ply, write_ply

__all__ = [
    "SH_C0", "GaussianSplats", "KeepoutBox", "SceneBundle", "TableSpec", "load_scene",
    "read_gaussians", "read_ply", "save_scene", "write_ply",
]
