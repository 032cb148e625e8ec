"""Alignment of a reconstruction to the simulator (real2sim-eval, Sec. III-C).

- :mod:`.color`: degree-2 per-channel polynomial from rendered splat colours to captured
  camera colours, IRLS with the Tukey bi-weight, applied to the splats' SH DC;
- :mod:`.pose`: ICP with RANSAC initialisation between Gaussian centres and points sampled
  from the robot/object model, per-link segmentation and forward kinematics of the
  segmented Gaussians.

CLI: ``bench align color|pose`` (:mod:`.cli`).
"""
