"""Run inside a LeRobot environment: a checkpoint's actions from LeRobot's API directly.

``python lerobot_reference.py FOLDER REQUESTS.npz OUT.npz``: no splatserve code, the
in-process reference the served actions must equal bit for bit.
"""

import sys

import numpy as np
import torch
from lerobot.configs.policies import PreTrainedConfig
from lerobot.policies.factory import get_policy_class, make_pre_post_processors

folder, requests = sys.argv[1], np.load(sys.argv[2])
config = PreTrainedConfig.from_pretrained(folder)
config.device = "cpu"
policy = get_policy_class(config.type).from_pretrained(folder, config=config).eval()
pre, post = make_pre_post_processors(policy.config, pretrained_path=folder)
out = {}
for i in range(int(requests["count"])):
    image = torch.from_numpy(requests[f"image_{i}"]).permute(2, 0, 1).float().div(255.0)
    batch = {"observation.images.wrist": image.unsqueeze(0),
             "observation.state": torch.from_numpy(requests[f"state_{i}"]).unsqueeze(0),
             "task": str(requests[f"task_{i}"])}
    with torch.inference_mode():
        actions = post(policy.predict_action_chunk(pre(batch)))
    out[f"actions_{i}"] = actions.float().numpy().reshape(-1, actions.shape[-1])
np.savez(sys.argv[3], **out)
