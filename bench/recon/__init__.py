"""Reconstruction: capture manifests, frame selection, fisheye -> pinhole views, 3DGS training.

Modules: :mod:`bench.recon.capture` (manifest + sharpest-frame selection),
:mod:`bench.recon.reproject` (nine pinhole views per fisheye frame),
:mod:`bench.recon.train` (3DGS training: gsplat on CUDA, a pure-torch trainer on CPU),
:mod:`bench.recon.cli` (``bench train``, ``bench coverage plan``).
"""
