"""The `bench demo` main job: the bundled study's orchestration, capture/build and training.

The top floor: nothing else imports it. What others use of the demo lives below it: the
ground-truth worlds, sensor model and real-domain env in :mod:`bench.worlds`, the learned
policies' network, inference and recipes in :mod:`bench.policies.bc_network` and
:mod:`bench.policies.bc_recipes` (their shipped weights stay data under ``bench/demo/assets``).
"""
