"""Run inside a LeRobot environment: a tiny ACT built with LeRobot's own classes, saved.

``python lerobot_build_act.py FOLDER`` writes FOLDER (a pretrained_model directory:
config, weights, pre/post-processors with the normalisation statistics below). Used by
test_lerobot_served.py (in .venv-lerobot) and test_uv_scripts.py (in uv's environment).
"""

import sys

import numpy as np
import torch
from lerobot.configs.types import FeatureType, PolicyFeature
from lerobot.policies.act.configuration_act import ACTConfig
from lerobot.policies.act.modeling_act import ACTPolicy
from lerobot.policies.factory import make_pre_post_processors

torch.manual_seed(0)
config = ACTConfig(
    input_features={"observation.images.wrist": PolicyFeature(FeatureType.VISUAL, (3, 32, 32)),
                    "observation.state": PolicyFeature(FeatureType.STATE, (8,))},
    output_features={"action": PolicyFeature(FeatureType.ACTION, (7,))},
    chunk_size=10, n_action_steps=10, dim_model=32, n_heads=2, dim_feedforward=64,
    n_encoder_layers=1, n_decoder_layers=1, use_vae=False, pretrained_backbone_weights=None,
    device="cpu")
# small deltas around a still pose, an open gripper (0.08 m)
stats = {"observation.state": {"mean": np.zeros(8), "std": np.ones(8)},
         "action": {"mean": np.array([0, 0, 0, 0, 0, 0, 0.08]),
                    "std": np.array([0.002] * 6 + [0.001])},
         "observation.images.wrist": {"mean": np.full((3, 1, 1), 0.5),
                                      "std": np.full((3, 1, 1), 0.2)}}
policy = ACTPolicy(config)
folder = sys.argv[1]
policy.save_pretrained(folder)
pre, post = make_pre_post_processors(config, dataset_stats=stats)
pre.save_pretrained(folder)
post.save_pretrained(folder)
