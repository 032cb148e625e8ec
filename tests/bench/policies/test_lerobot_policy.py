"""LeRobot ACT from a local pretrained_model directory (skipped without the lerobot extra)."""

import numpy as np
import pytest


def test_missing_extra_is_a_one_line_error(monkeypatch):
    import builtins

    from bench.errors import BenchError
    from bench.policies.lerobot_policy import require_lerobot

    real_import = builtins.__import__

    def no_lerobot(name, *args, **kwargs):
        if name == "lerobot" or name.startswith("lerobot."):
            raise ImportError("no lerobot")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_lerobot)
    with pytest.raises(BenchError, match=r"splatbench\[lerobot\]") as err:
        require_lerobot()
    assert "\n" not in str(err.value)


def test_tiny_act_runs_through_the_bench_interface(tmp_path):
    pytest.importorskip("lerobot")
    import torch
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.factory import make_pre_post_processors

    import bench.sim
    from bench.policies import make_policy
    from bench.policies.base import policy_observation
    from bench.scene.sample import make_sample_scene

    torch.manual_seed(0)
    config = ACTConfig(
        input_features={"observation.images.wrist": PolicyFeature(FeatureType.VISUAL, (3, 32, 32)),
                        "observation.state": PolicyFeature(FeatureType.STATE, (8,))},
        output_features={"action": PolicyFeature(FeatureType.ACTION, (7,))},
        chunk_size=10, n_action_steps=10, dim_model=32, n_heads=2, dim_feedforward=64,
        n_encoder_layers=1, n_decoder_layers=1, use_vae=False, pretrained_backbone_weights=None,
        device="cpu")
    stats = {"observation.state": {"mean": np.zeros(8), "std": np.ones(8)},
             "action": {"mean": np.full(7, 0.01), "std": np.full(7, 0.001)},
             "observation.images.wrist": {"mean": np.full((3, 1, 1), 0.5),
                                          "std": np.full((3, 1, 1), 0.2)}}
    policy = ACTPolicy(config)
    folder = tmp_path / "pretrained_model"
    policy.save_pretrained(folder)
    pre, post = make_pre_post_processors(config, dataset_stats=stats)
    pre.save_pretrained(folder)
    post.save_pretrained(folder)

    env = bench.sim.make_env("cup", make_sample_scene(seed=0, n_gaussians=2000),
                             image_size=(32, 32), max_frames=20)
    bench_policy = make_policy("lerobot", env, path=str(folder))
    obs, info = env.reset(seed=0)
    bench_policy.reset(seed=0)
    chunk = bench_policy.act(policy_observation(obs, env), info)
    env.close()
    assert chunk.shape == (10, 7) and chunk.dtype == np.float32
    # unnormalised with the stored action stats: around mean 0.01, scale 0.001
    assert abs(float(chunk.mean()) - 0.01) < 0.01
