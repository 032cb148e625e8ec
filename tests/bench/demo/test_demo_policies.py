"""The demo's learned policies (issue 12 item 3, item 7 "no privileged state").

Shipped weights: bench/demo/assets/policies/<name>/<task>/ (docs/demo-policies.md).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from bench.demo.bc_training import TOOL, TrainPoliciesConfig, train_policy, weights_sha256
from bench.demo.train_policies import train_policies
from bench.policies.bc_network import BCConfig, decode_chunk, encode_chunk
from bench.policies.bc_recipes import (
    ALL_RECIPES,
    DAGGER_RECIPES,
    dagger_recipe,
    recipe,
    recipe_tasks,
)
from bench.policies.learned import (
    ASSETS,
    DEMO_POLICIES,
    LEARNED_POLICIES,
    LEARNED_TASKS,
    LEARNED_VARIANTS,
    LearnedPolicy,
    policy_dir,
)
from bench.worlds.real import REAL_DOMAIN

TASKS = ("cup", "tape", "pen")


def _expert_query(task: str):
    """A real-domain env (the demo's settings) one expert chunk into fresh start 9000."""
    from bench.policies import make_policy
    from bench.policies.base import policy_observation, to_env_chunk

    env = REAL_DOMAIN.make_env("gt-duo", task)
    obs, info = env.reset(seed=9000)
    # advance one expert chunk so the state is not the home pose
    expert = make_policy("expert", env)
    obs, _, _, _, info = env.step(to_env_chunk(expert.act(policy_observation(obs, env), info),
                                               env, info))
    return env, policy_observation(obs, env), info


@pytest.fixture(scope="module")
def cup_query():
    env, obs, info = _expert_query("cup")
    yield env, obs, info
    env.close()


@pytest.fixture(scope="module")
def tape_query():
    env, obs, info = _expert_query("tape")
    yield env, obs, info
    env.close()


def _learned_names(task: str) -> list[str]:
    """Every learned registry entry (recipe or deployment variant) with weights for ``task``."""
    return [name for name in (*LEARNED_POLICIES, *LEARNED_VARIANTS)
            if task in LEARNED_TASKS.get(LEARNED_VARIANTS.get(name, (name,))[0],
                                         TASKS)]


def _moved_state(info: dict, rng: np.random.Generator) -> dict:
    """``info`` with every object's pose (and the attached flag) scrambled in ``state``."""
    state = info["state"]
    objects = {name: dataclasses.replace(
        o, pos=o.pos + np.r_[rng.uniform(-0.15, 0.15, 2), 0.0],
        quat=np.roll(o.quat, 1)) for name, o in state.objects.items()}
    out = dict(info)
    out["state"] = dataclasses.replace(state, objects=objects, attached=None)
    out["objects"] = {name: {"pos": rng.normal(size=3)} for name in info.get("objects", {})}
    return out


def _scrambled(value, rng: np.random.Generator):
    """Any info value replaced by garbage of a similar kind (recursively)."""
    if isinstance(value, dict):
        return {k: _scrambled(v, rng) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return rng.normal(size=value.shape).astype(value.dtype) if value.dtype.kind == "f" \
            else rng.integers(0, 255, size=value.shape).astype(value.dtype)
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 7
    if isinstance(value, list | tuple):
        return [_scrambled(v, rng) for v in value][::-1]
    return None


@pytest.mark.parametrize("task", ["cup", "tape"])
def test_learned_policies_read_no_privileged_state(task, request) -> None:
    """Every learned entry (bc-aux and bc-aux-dagger on Tape included) ignores ``info``."""
    env, obs, info = request.getfixturevalue(f"{task}_query")
    names = _learned_names(task)
    assert task != "tape" or {"bc-aux", "bc-aux-dagger"} <= set(names)
    rng = np.random.default_rng(0)
    moved = _moved_state(info, rng)
    garbage = {k: _scrambled(v, rng) for k, v in info.items() if k != "state"}
    garbage["state"] = moved["state"]
    other_obs = dict(obs, prompt="stack the blocks", timestamp=123.0,
                     object_state=rng.normal(size=15).astype(np.float32))
    for key in [k for k in obs if k.endswith("_rgb")]:  # raw env keys: the policy reads images
        other_obs[key] = np.zeros_like(obs[key])
    for name in names:
        weights, rows = LEARNED_VARIANTS.get(name, (name, 8))
        policy = LearnedPolicy(env.unwrapped, name=name, weights=weights, rows=rows)
        policy.reset(seed=9000)
        reference = policy.act(obs, info)
        assert np.array_equal(policy.act(obs, moved), reference)
        assert np.array_equal(policy.act(other_obs, garbage), reference)
        assert np.array_equal(policy.act(obs, {}), reference)
        # ... while what it may read does change its actions
        brighter = dict(obs, images={k: np.clip(v.astype(int) + 60, 0, 255).astype(np.uint8)
                                     for k, v in obs["images"].items()})
        assert not np.array_equal(policy.act(brighter, info), reference)
        shifted = dict(obs, proprio=obs["proprio"] + np.float32(0.05) * np.r_[1, 1, 0, 0, 0, 0,
                                                                                 0, 0])
        assert not np.array_equal(policy.act(shifted, info), reference)


def test_scrambling_state_changes_the_privileged_expert(cup_query) -> None:
    """The same scramble moves the scripted expert: the test above can fail."""
    from bench.policies import make_policy

    env, obs, info = cup_query
    expert = make_policy("expert", env)
    expert.reset(seed=9000)
    reference = expert.act(obs, info)
    expert.reset(seed=9000)
    moved = expert.act(obs, _moved_state(info, np.random.default_rng(0)))
    assert not np.allclose(moved, reference, atol=1e-4)


@pytest.mark.parametrize("task", TASKS)
def test_shipped_weights_load_with_their_config_and_manifest(task: str) -> None:
    from safetensors.torch import load_file

    names = [n for n in LEARNED_POLICIES if task in LEARNED_TASKS.get(n, TASKS)]
    assert names == [n for n in ALL_RECIPES if task in recipe_tasks(n)]
    for name in names:
        directory = policy_dir(name, task)
        config = json.loads((directory / "config.json").read_text())
        manifest = json.loads((directory / "manifest.json").read_text())
        assert manifest["params"] == config and manifest["tool"] == TOOL
        assert manifest["weights_sha256"] == weights_sha256(
            load_file(str(directory / "model.safetensors")))
        data = manifest["data"]
        assert data["recording"]["real"] == REAL_DOMAIN.to_json()
        assert data["recording"]["condition_offset"] == 5000
        assert data["recording"]["worlds"] == ["gt-duo", "gt-flat", "gt-g2"]
        assert len(data["sha256"]) == 64 and len(data["recording_sha256"]) == 64
        if name in DAGGER_RECIPES:  # the fine-tuned last round of the DAgger recipe
            dagger = dagger_recipe(name, task)
            base = recipe(dagger.base, task)
            assert BCConfig.from_json(config) == dataclasses.replace(
                recipe(name, task), epochs=dagger.epochs, lr=dagger.lr,
                seed=base.seed + dagger.rounds)
            assert manifest["dagger"] == dagger.to_json()
            assert manifest["round"] == dagger.rounds - 1
            assert len(data["rounds"]) == dagger.rounds and data["demo_episodes"] == 300
            for entry in data["rounds"]:
                assert entry["episodes"] == dagger.episodes and len(entry["sha256"]) == 64
                assert len(entry["rolled_out_weights_sha256"]) == 64
            assert data["rounds"][0]["rolled_out_weights_sha256"] == json.loads(
                (policy_dir(dagger.base, task) / "manifest.json").read_text())["weights_sha256"]
            assert data["samples"] == manifest["counts"]["samples"] > 10 * 300
            continue
        assert BCConfig.from_json(config) == recipe(name, task)
        assert data["episodes"] == config["episodes"] == manifest["counts"]["episodes"]
        assert data["conditions"] == [5000, 5000 + config["episodes"] - 1]
        assert data["samples"] > 10 * data["episodes"]
        if config.get("aux_weight", 0) > 0:
            assert len(data["recording_aux_sha256"]) == 64
    a, b = names[:2]
    assert recipe(a, task) != recipe(b, task)
    for name in DEMO_POLICIES[task]:  # every demo policy is a recipe or a variant of one
        assert LEARNED_VARIANTS.get(name, (name,))[0] in names


def test_shipped_assets_stay_small() -> None:
    # 18 weight files of 80k-109k parameters (0.44 MB each), 7.1 MB; issue 33's budget for
    # every demo asset together is 60 MB (scenes and captures: test_demo_build.py, ~31 MB)
    total = sum(p.stat().st_size for p in ASSETS.rglob("*") if p.is_file())
    assert 0 < total < 8e6


def test_one_real_domain_query_any_image_size(cup_query) -> None:
    """Shipped weights run on the real-domain observation; a 128 px image is resized."""
    from bench.policies import make_policy
    from bench.policies.base import is_privileged, to_env_chunk

    env, obs, info = cup_query
    for name in DEMO_POLICIES["cup"]:
        assert not is_privileged(name)
        policy = make_policy(name, env, seed=0)
        chunk = policy.act(obs, info)
        assert chunk.dtype == np.float32 and chunk.shape == (policy.rows, 7)
        assert to_env_chunk(chunk, env, info).shape == (32, 7)
        big = {k: np.repeat(np.repeat(v, 2, 0), 2, 1) for k, v in obs["images"].items()}
        assert np.allclose(policy.act(dict(obs, images=big), info), chunk, atol=1e-5)


def _tiny_dataset(seed: int = 0, n: int = 24) -> dict:
    rng = np.random.default_rng(seed)
    actions = np.zeros((n, 32, 7), np.float32)
    actions[:, :, :3] = rng.normal(0, 0.01, (n, 32, 3))
    actions[:, :, 5] = rng.normal(0, 0.05, (n, 32))
    actions[:, :, 6] = rng.uniform(0, 0.1, (n, 1))
    return {"wrist_left": rng.integers(0, 255, (n, 32, 32, 3), dtype=np.uint8),
            "wrist_right": rng.integers(0, 255, (n, 32, 32, 3), dtype=np.uint8),
            "proprio": rng.normal(size=(n, 8)).astype(np.float32), "actions": actions,
            "episode": np.arange(n, dtype=np.int32) // 6, "world": np.zeros(n, np.int32),
            "condition": np.arange(n, dtype=np.int32) // 6 + 5000,
            "frame": np.zeros(n, np.int32), "success": np.ones(4, bool)}


def test_training_is_deterministic_both_ways() -> None:
    data = _tiny_dataset()
    config = BCConfig(task="cup", episodes=4, image_size=16, channels=(4, 8), hidden=16,
                      epochs=2, batch_size=8, augment=True)
    first, log = train_policy(config, data, progress=False)
    second, _ = train_policy(config, data, progress=False)
    other, _ = train_policy(dataclasses.replace(config, seed=1), data, progress=False)
    assert weights_sha256(first) == weights_sha256(second)
    assert weights_sha256(first) != weights_sha256(other)
    assert log["samples"] == 24 and len(log["losses"]) == 2


def test_first_query_repeat_and_per_task_recipe_fields() -> None:
    data = _tiny_dataset()
    data["frame"] = np.tile(np.arange(6, dtype=np.int32), 4)  # 4 episodes of 6 queries
    config = BCConfig(task="pen", episodes=4, image_size=16, channels=(4, 8), hidden=16,
                      epochs=2, batch_size=8, augment=False, horizon=8)
    once_state, once = train_policy(config, data, progress=False)
    thrice_state, thrice = train_policy(dataclasses.replace(config, first_query_repeat=3),
                                        data, progress=False)
    assert "drawn_per_epoch" not in once and thrice["drawn_per_epoch"] == 24 + 2 * 4
    assert once["samples"] == thrice["samples"] == 24
    assert weights_sha256(once_state) != weights_sha256(thrice_state)
    again, _ = train_policy(dataclasses.replace(config, first_query_repeat=3), data,
                            progress=False)
    assert weights_sha256(again) == weights_sha256(thrice_state)
    pen, tape = recipe("bc-aux", "pen"), recipe("bc-aux", "tape")
    assert (pen.first_query_repeat, tape.first_query_repeat) == (8, 1)
    assert recipe("bc-aux-dagger", "pen").first_query_repeat == 8
    assert (dagger_recipe("bc-aux-dagger", "pen").rounds,
            dagger_recipe("bc-aux-dagger", "tape").rounds) == (5, 2)
    override = TrainPoliciesConfig(dagger={"rounds": 1})
    assert override.dagger_config("bc-aux-dagger", "pen").rounds == 1
    assert "first_query_repeat" not in tape.to_json()  # configs of earlier weights unchanged
    assert BCConfig.from_json(pen.to_json()) == pen
    with pytest.raises(ValueError, match="first_query_repeat"):
        BCConfig(first_query_repeat=0)


def test_blur_augmentation_matches_scipy_and_is_off_by_default() -> None:
    """gaussian_blur against scipy.ndimage.gaussian_filter (same std, replicate border =
    scipy's "nearest", truncated at 3 std); blur_sigma 0 leaves augment_images' output and
    its generator stream as before (shipped recipes train byte-identically)."""
    import torch
    from scipy.ndimage import gaussian_filter

    from bench.demo.bc_training import augment_images, gaussian_blur

    x = torch.from_numpy(np.random.default_rng(0).random((2, 3, 12, 10)))
    sigma = torch.tensor([0.0, 1.3], dtype=torch.float64)
    out = gaussian_blur(x, sigma).numpy()
    np.testing.assert_allclose(out[0], x[0].numpy(), atol=1e-12)  # std 0: unchanged
    # one radius for the batch: ceil(3 x 1.3) = 4 taps each side, scipy's truncate = 4 / 1.3
    ref = np.stack([gaussian_filter(c, 1.3, mode="nearest", truncate=4 / 1.3)
                    for c in x[1].numpy()])
    np.testing.assert_allclose(out[1], ref, atol=1e-12)

    def run(blur: float):
        gen = torch.Generator().manual_seed(3)
        img = augment_images(x.float(), gen, shift_px=1, jitter=0.2, blur_sigma=blur)
        return img, torch.rand(1, generator=gen)

    plain, after_plain = run(0.0)
    gen = torch.Generator().manual_seed(3)
    padded = torch.nn.functional.pad(x.float(), (1,) * 4, mode="replicate")
    offsets = torch.randint(0, 3, (2, 2), generator=gen).tolist()
    expect = torch.stack([padded[i, :, oy:oy + 12, ox:ox + 10]
                          for i, (oy, ox) in enumerate(offsets)])
    gain = 1.0 + 0.2 * (2 * torch.rand(2, 1, 1, 1, generator=gen) - 1)
    channel = 1.0 + 0.1 * (2 * torch.rand(2, 3, 1, 1, generator=gen) - 1)
    assert torch.equal(plain, (expect * gain * channel).clamp(0.0, 1.0))
    assert torch.equal(after_plain, torch.rand(1, generator=gen))  # no draw spent on blur
    blurred, _ = run(2.0)
    assert not torch.equal(blurred, plain)
    assert "blur_sigma" not in recipe("bc-aux", "tape").to_json()  # shipped configs unchanged
    assert BCConfig.from_json(BCConfig(blur_sigma=1.5).to_json()).blur_sigma == 1.5
    with pytest.raises(ValueError, match="blur_sigma"):
        BCConfig(blur_sigma=-1.0)


def test_action_chunk_round_trip() -> None:
    """encode_chunk / decode_chunk invert each other on yaw-only delta rows."""
    actions = _tiny_dataset()["actions"]
    trajectory = encode_chunk(actions, 16)
    for i in range(len(actions)):
        assert np.allclose(decode_chunk(trajectory[i]), actions[i, :16], atol=1e-6)


def test_demonstrations_are_seeded_and_noisy() -> None:
    """Same config -> same dataset sha256; the injected noise moves the recorded states."""
    from bench.demo.demos import DemonstrationConfig, dataset_sha256, record_demonstrations
    from bench.worlds.real import RealDomainConfig

    small = RealDomainConfig(image_size=(16, 16))
    config = DemonstrationConfig(task="cup", episodes=1, execute=8, max_frames=24, real=small)
    first = record_demonstrations(config, progress=False)
    again = record_demonstrations(config, progress=False)
    clean = record_demonstrations(dataclasses.replace(config, noise_xyz=0.0, noise_yaw=0.0),
                                  progress=False)
    assert dataset_sha256(first) == dataset_sha256(again)
    assert first["wrist_left"].shape[1:] == (16, 16, 3) and first["actions"].shape[1:] == (32, 7)
    assert first["condition"][0] == 5000 and list(first["frame"][:3]) == [0, 8, 16]
    assert not np.allclose(first["proprio"][1:], clean["proprio"][1:])


@pytest.mark.parametrize(("flag", "value"), [("--tasks", "rope"), ("--policies", "bc-huge")])
def test_train_policies_cli_refuses_unknown_names(tmp_path, flag, value) -> None:
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "bench.cli", "demo", "train-policies",
                             "--out", str(out), flag, value],
                            capture_output=True, text=True)
    assert result.returncode == 2 and flag in result.stderr
    assert "Traceback" not in result.stderr and not out.exists()


def _dagger_config(seed: int = 0) -> TrainPoliciesConfig:
    """A tiny DAgger run: 2 Tape demonstrations, 1 epoch, 2 rounds of 1 short rollout."""
    return TrainPoliciesConfig(
        tasks=("tape",), policies=("bc-aux-dagger",), episodes=2, epochs=1,
        dagger={"rounds": 2, "episodes": 1, "max_frames": 24, "epochs": 1, "beta": 0.5,
                "seed": seed})


def _stage_files(out) -> dict:
    """Relative path -> (sha256, mtime_ns) of every dataset and weights file under ``out``.

    (The JSON manifests also hold wall-clock durations, so they are compared by content.)
    """
    import hashlib

    return {str(p.relative_to(out)): (hashlib.sha256(p.read_bytes()).hexdigest(),
                                      p.stat().st_mtime_ns)
            for p in sorted(out.rglob("*")) if p.suffix in (".npz", ".safetensors")}


@pytest.mark.slow
def test_dagger_stages_are_deterministic_and_resumable(tmp_path) -> None:
    """Same config -> same bytes at every stage; another seed -> other rollouts and weights;
    an interrupted run resumes from its last complete stage and ends byte-identical."""
    import shutil

    first, second, other = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for out in (first, second):
        train_policies(out, _dagger_config(), progress=False)
    files = _stage_files(first)
    assert {k: v[0] for k, v in files.items()} == {k: v[0] for k, v in
                                                    _stage_files(second).items()}
    final = "policies/bc-aux-dagger/tape/model.safetensors"
    for r in (0, 1):
        assert f"dagger/round{r}/bc-aux-dagger/tape/rollouts.npz" in files
        assert f"dagger/round{r}/bc-aux-dagger/tape/model.safetensors" in files
    assert final in files and "policies/bc-aux/tape/model.safetensors" in files
    rollout = json.loads((first / "dagger/round1/bc-aux-dagger/tape/rollouts.json").read_text())
    assert rollout["key"]["round"] == 1 and rollout["episodes"] == 1
    assert rollout["key"]["policy_weights_sha256"] == json.loads(
        (first / "dagger/round0/bc-aux-dagger/tape/manifest.json").read_text())["weights_sha256"]

    # the other seed: reuse the demonstrations and the base (resume), new DAgger rounds
    shutil.copytree(first / "demos", other / "demos")
    shutil.copytree(first / "policies" / "bc-aux", other / "policies" / "bc-aux")
    train_policies(other, _dagger_config(seed=1), resume=True, progress=False)
    changed = _stage_files(other)
    assert changed["policies/bc-aux/tape/model.safetensors"] == \
        files["policies/bc-aux/tape/model.safetensors"]  # kept, not retrained
    assert changed["dagger/round0/bc-aux-dagger/tape/rollouts.npz"][0] != \
        files["dagger/round0/bc-aux-dagger/tape/rollouts.npz"][0]
    assert changed[final][0] != files[final][0]

    # interrupt after round 0: round 1 and the final copy are gone; resume redoes just those
    shutil.rmtree(first / "dagger" / "round1")
    (first / final).unlink()
    train_policies(first, _dagger_config(), resume=True, progress=False)
    resumed = _stage_files(first)
    assert {k: v[0] for k, v in resumed.items()} == {k: v[0] for k, v in files.items()}
    for key in ("demos/tape.npz", "policies/bc-aux/tape/model.safetensors",
                "dagger/round0/bc-aux-dagger/tape/rollouts.npz",
                "dagger/round0/bc-aux-dagger/tape/model.safetensors"):
        assert resumed[key][1] == files[key][1], key  # not rewritten
    assert resumed[final][1] != files[final][1]


#: dataset_sha256 of the first 10 episodes of the Cup recording the shipped Cup weights were
#: trained on (recording sha256 21907d77..., in their manifests), computed from that recording
#: with select_episodes. Re-recorded here from scratch: if it differs, the physics or the
#: real-domain rendering changed by even round-off (a 1e-6 m drift once diverged a demo at
#: frame 44), and `bench demo train-policies` no longer reproduces the shipped weights.
#: Recorded on AMD EPYC (AVX2, OpenBLAS Zen kernels); the same bytes under the reference numerics
#: of tests/conftest.py (OpenBLAS Haswell, numpy SIMD up to X86_V3), checked 2026-12-02. Under
#: other numerics (numpy's AVX-512 loops, OpenBLAS SkylakeX) the recording differs by round-off.
CUP_PREFIX_SHA256 = "953510629aa7c09608eba32b87e47559ddb3fb4ea99d24885507b1be227af8d4"

@pytest.mark.slow
def test_recording_prefix_reproduces_the_shipped_weights_recording(reference_numerics) -> None:
    from bench.demo.demos import DemonstrationConfig, dataset_sha256, record_demonstrations

    manifest = json.loads((policy_dir("bc-large", "cup") / "manifest.json").read_text())
    assert manifest["data"]["recording_sha256"].startswith("21907d77")
    data = record_demonstrations(DemonstrationConfig(task="cup", episodes=10), progress=False)
    assert len(data["frame"]) == 168 and dataset_sha256(data) == CUP_PREFIX_SHA256
