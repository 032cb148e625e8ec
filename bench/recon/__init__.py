"""Reconstruction: capture manifests, frame selection, fisheye -> pinhole views, 3DGS training.

Modules: :mod:`bench.recon.capture` (manifest + sharpest-frame selection),
:mod:`bench.recon.reproject` (nine pinhole views per fisheye frame),
:mod:`bench.recon.train` (3DGS training: gsplat on CUDA, a pure-torch trainer on CPU),
:mod:`bench.recon.densify` (gsplat DefaultStrategy's grow / prune rules for the CPU trainer),
:mod:`bench.recon.synthetic` (a synthetic capture with known ground truth),
:mod:`bench.recon.cli` (``bench capture``, ``bench train``, ``bench coverage plan``).
"""
