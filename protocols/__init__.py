"""Statistics and study protocols (torch-, mujoco- and warp-free)."""
