"""Ground-truth ("real") worlds: procedural MuJoCo rooms, their sensor model, the real-domain env.

Below the policies, studies and demo (anything may use them; they use only the scene,
render and simulator rooms): :mod:`bench.worlds.rooms` (the rooms, their registry and
renderer), :mod:`bench.worlds.sensor` (the seeded camera sensor model) and
:mod:`bench.worlds.real` (the "real"-domain env and its settings, ``REAL_DOMAIN``).
The bundled demo (:mod:`bench.demo`) captures, reconstructs and evaluates in them.
"""
