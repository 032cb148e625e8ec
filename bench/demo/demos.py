"""Demonstrations for the learned policies, recorded in the ground-truth ("real") worlds.

The scripted expert (:class:`bench.policies.expert.ScriptedExpert`, privileged) drives
each episode in a ground-truth world (:mod:`bench.worlds.rooms`) through the real-domain
env (:data:`bench.worlds.real.REAL_DOMAIN`: the tilted ``yubi-dual`` fisheyes, the sensor
model). At every query the recorder stores what a learned policy may see - both wrist
images and the proprioception - and the expert's clean action chunk as the label. The
chunk that is *executed* is the label plus seeded Gaussian noise on every translation and
yaw row (DART, Laskey et al. 2017): the next query is labelled by the expert from the
perturbed state, so the data shows how to recover from the errors a learner makes.

Episodes cycle through the worlds (episode ``i`` runs in ``worlds[i % len(worlds)]``) with
initial condition ``condition_offset + i`` of the task grid (default 5000+, disjoint from
the study's simulated 100+ and real 1000+ trials), so the first ``n`` episodes of a
dataset are a balanced smaller dataset. Same config -> byte-identical arrays
(:func:`dataset_sha256`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.worlds.real import REAL_DOMAIN, RealDomainConfig

WORLD_IDS = ("gt-duo", "gt-flat", "gt-g2")
IMAGE_KEYS = ("wrist_left_rgb", "wrist_right_rgb")
#: Arrays of a recorded dataset in hashing order (name, dtype).
DATASET_ARRAYS = (
    ("wrist_left", "uint8"),   # [N, H, W, 3]
    ("wrist_right", "uint8"),  # [N, H, W, 3]
    ("proprio", "float32"),    # [N, 8]
    ("actions", "float32"),    # [N, chunk_size, 7] the expert's clean chunk
    ("episode", "int32"),      # [N]
    ("world", "int32"),        # [N] index into config.worlds
    ("condition", "int32"),    # [N]
    ("frame", "int32"),        # [N]
)
#: Train-time-only targets (privileged: never a policy input), hashed apart from
#: :data:`DATASET_ARRAYS` (:func:`aux_sha256`) so recordings without them keep their sha256.
AUX_ARRAYS = (
    ("object_pose", "float32"),  # [N, 5] actor in the TCP frame: x y z, cos, sin 2 dyaw
)
#: What :func:`append_query` stores per query (the rest of the arrays is per episode).
QUERY_ARRAYS = ("wrist_left", "wrist_right", "proprio", "actions", "frame", "object_pose")


@dataclass(frozen=True)
class DemonstrationConfig:
    """How the demonstrations of one task are recorded.

    Attributes:
        task: ``cup``, ``tape`` or ``pen``.
        episodes: Episodes in all (cycled over ``worlds``).
        worlds: Ground-truth world ids.
        condition_offset: Initial condition of episode 0 (episode ``i``: offset + i).
        seed: Seed of the injected noise (episode ``i`` draws from ``default_rng([seed, i])``).
        execute: Chunk rows executed per query while recording (fewer than at evaluation
            gives more, denser labelled states per episode; the label is the expert's whole
            chunk either way).
        noise_xyz: Standard deviation of the noise added to each executed row's
            translation, metres (0 = clean expert).
        noise_yaw: Standard deviation of the noise added to each executed row's yaw, rad.
        max_frames: Episode time limit while recording, 10 Hz frames.
        real: The real-domain render settings (image size, shadows, tilt, sensor).
    """

    task: str = "cup"
    episodes: int = 240
    worlds: tuple[str, ...] = WORLD_IDS
    condition_offset: int = 5000
    seed: int = 0
    execute: int = 4
    noise_xyz: float = 0.004
    noise_yaw: float = 0.03
    max_frames: int = 160
    real: RealDomainConfig = field(default_factory=lambda: REAL_DOMAIN)

    def __post_init__(self) -> None:
        if self.task not in ("cup", "tape", "pen"):
            raise ValueError(f"task must be cup, tape or pen, got {self.task!r}")
        if self.episodes < 1 or self.execute < 1 or self.max_frames < 1:
            raise ValueError("episodes, execute and max_frames must be >= 1")
        if self.noise_xyz < 0 or self.noise_yaw < 0:
            raise ValueError("noise_xyz and noise_yaw must be >= 0")
        if not self.worlds:
            raise ValueError("worlds must name at least one ground-truth world")
        object.__setattr__(self, "worlds", tuple(self.worlds))

    def to_json(self) -> dict[str, Any]:
        """The resolved config as a JSON-ready dict."""
        out = dataclasses.asdict(self)
        out["worlds"] = list(self.worlds)
        out["real"] = self.real.to_json()
        return out


def perturb_chunk(  # chunk [T, 7] -> [T, 7]
    chunk: np.ndarray, rng: np.random.Generator, *, noise_xyz: float, noise_yaw: float
) -> np.ndarray:
    """The chunk with Gaussian noise on each row's translation (m) and yaw (rad, rz)."""
    out = np.array(chunk, dtype=np.float64)
    out[:, :3] += rng.normal(0.0, noise_xyz, size=(len(out), 3))
    out[:, 5] += rng.normal(0.0, noise_yaw, size=len(out))
    return out.astype(np.float32)


def record_episode(  # -> (samples dict of lists, success)
    env: Any, expert: Any, *, condition: int, rng: np.random.Generator,
    config: DemonstrationConfig
) -> tuple[dict[str, list], bool]:
    """One noisy expert episode; every query's images, proprio and clean expert chunk."""
    from bench.policies.base import policy_observation, to_env_chunk

    rows: dict[str, list] = {key: [] for key in QUERY_ARRAYS}
    obs, info = env.reset(seed=condition)
    expert.reset(seed=condition)
    while True:
        label = to_env_chunk(expert.act(policy_observation(obs, env), info), env, info)
        append_query(rows, obs, info, label, actor=env.unwrapped.task.actor.name)
        executed = perturb_chunk(label, rng, noise_xyz=config.noise_xyz,
                                 noise_yaw=config.noise_yaw)
        obs, _, terminated, truncated, info = env.step(executed)
        if terminated or truncated:
            return rows, bool(info["success"])


def object_pose_in_tcp(info: dict[str, Any], actor: str) -> np.ndarray:  # -> float32 [5]
    """The actor's pose in the commanded TCP frame: x, y, z (m), cos and sin of 2 x rel. yaw.

    A privileged train-time target (an auxiliary loss teaches the encoder where the object
    is); the doubled angle makes it symmetric like the jaw (a pen's yaw is modulo pi).
    """
    from bench.policies.expert import _object_yaw, _yaw_of

    target = np.asarray(info["tcp_target"], dtype=np.float64)
    state = info["state"].objects[actor]
    rel = target[:3, :3].T @ (np.asarray(state.pos, dtype=np.float64) - target[:3, 3])
    dyaw = _object_yaw(state.quat) - _yaw_of(target[:3, :3])
    return np.array([*rel, np.cos(2 * dyaw), np.sin(2 * dyaw)], dtype=np.float32)


def append_query(rows: dict[str, list], obs: dict[str, Any], info: dict[str, Any],
                 label: np.ndarray, *, actor: str) -> None:
    """Append one labelled query (what the policy sees, the label, the aux target) to ``rows``."""
    rows["wrist_left"].append(obs[IMAGE_KEYS[0]])
    rows["wrist_right"].append(obs[IMAGE_KEYS[1]])
    rows["proprio"].append(np.asarray(obs["proprio"], dtype=np.float32))
    rows["actions"].append(label)
    rows["frame"].append(int(info["frame"]))
    rows["object_pose"].append(object_pose_in_tcp(info, actor))


def record_demonstrations(  # -> dict of arrays (DATASET_ARRAYS) + "success" [episodes]
    config: DemonstrationConfig, *, progress: bool = True
) -> dict[str, np.ndarray]:
    """Record ``config.episodes`` noisy expert episodes (module docstring)."""
    from bench.policies import make_policy
    from bench.progress import progress as progress_bar

    envs: dict[str, Any] = {}
    parts: dict[str, list] = {name: [] for name, _ in (*DATASET_ARRAYS, *AUX_ARRAYS)}
    success = []
    bar = progress_bar(range(config.episodes), desc=f"demos {config.task}", unit="ep",
                       disable=not progress, mininterval=5.0)
    for episode in bar:
        world_index = episode % len(config.worlds)
        world = config.worlds[world_index]
        if world not in envs:
            envs[world] = config.real.make_env(world, config.task, execute=config.execute,
                                               max_frames=config.max_frames)
        env = envs[world]
        expert = make_policy("expert", env, seed=0)
        rng = np.random.default_rng([config.seed, episode])
        condition = config.condition_offset + episode
        rows, ok = record_episode(env, expert, condition=condition, rng=rng, config=config)
        add_episode(parts, rows, episode=episode, world_index=world_index,
                    condition=condition)
        success.append(ok)
        bar.set_postfix(samples=sum(len(p) for p in parts["episode"]),
                        success=f"{np.mean(success):.2f}")
    for env in envs.values():
        env.close()
    return stack_episodes(parts, success)


def add_episode(parts: dict[str, list], rows: dict[str, list], *, episode: int,
                world_index: int, condition: int) -> None:
    """Append one episode's queries (``rows`` of :func:`append_query`) to ``parts``."""
    n = len(rows["frame"])
    for key in QUERY_ARRAYS:
        parts[key].append(np.asarray(rows[key]))
    parts["episode"].append(np.full(n, episode))
    parts["world"].append(np.full(n, world_index))
    parts["condition"].append(np.full(n, condition))


def stack_episodes(parts: dict[str, list], success: list[bool]) -> dict[str, np.ndarray]:
    """The recorded arrays (:data:`DATASET_ARRAYS`, :data:`AUX_ARRAYS`) and ``success``."""
    data = {name: np.concatenate(parts[name]).astype(dtype)
            for name, dtype in (*DATASET_ARRAYS, *AUX_ARRAYS)}
    data["success"] = np.asarray(success, dtype=bool)
    return data


def dataset_sha256(data: dict[str, np.ndarray]) -> str:
    """sha256 over the arrays of :data:`DATASET_ARRAYS` (name, dtype, shape, bytes) in order."""
    return _arrays_sha256(data, DATASET_ARRAYS)


def aux_sha256(data: dict[str, np.ndarray]) -> str | None:
    """sha256 over the :data:`AUX_ARRAYS` present (None: a recording without them)."""
    present = [(name, dtype) for name, dtype in AUX_ARRAYS if name in data]
    return _arrays_sha256(data, present) if present else None


def _arrays_sha256(data: dict[str, np.ndarray], arrays) -> str:
    digest = hashlib.sha256()
    for name, dtype in arrays:
        array = np.ascontiguousarray(data[name], dtype=dtype)
        digest.update(f"{name}:{array.dtype.str}:{array.shape};".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def select_episodes(data: dict[str, np.ndarray], count: int) -> dict[str, np.ndarray]:
    """The first ``count`` episodes of a dataset (a balanced subset: episodes cycle worlds)."""
    keep = data["episode"] < count
    out = {name: data[name][keep] for name, _ in (*DATASET_ARRAYS, *AUX_ARRAYS)
           if name in data}
    out["success"] = data["success"][:count]
    return out


def save_dataset(path: Path, data: dict[str, np.ndarray]) -> None:
    """Write a dataset as an uncompressed ``.npz`` (atomically: temp file, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, **data)
    tmp.replace(path)


def load_dataset(path: Path) -> dict[str, np.ndarray]:
    """Read a dataset written by :func:`save_dataset`."""
    with np.load(Path(path)) as archive:
        return {name: archive[name] for name in archive.files}


def dataset_summary(data: dict[str, np.ndarray], *, seconds: float | None = None
                    ) -> dict[str, Any]:
    """Counts and the sha256 of a dataset (for the data manifest)."""
    out = {"samples": int(len(data["episode"])), "episodes": int(len(data["success"])),
           "expert_success": int(np.sum(data["success"])),
           "image_shape": list(data["wrist_left"].shape[1:]),
           "chunk_shape": list(data["actions"].shape[1:]),
           "sha256": dataset_sha256(data)}
    if aux_sha256(data) is not None:
        out["aux_sha256"] = aux_sha256(data)
    if seconds is not None:
        out["record_seconds"] = round(float(seconds), 1)
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.demo.demos --task cup --episodes N --out FILE.npz`` (recording only)."""
    import argparse
    import json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", required=True)
    parser.add_argument("--episodes", type=int, default=DemonstrationConfig.episodes)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    config = DemonstrationConfig(task=args.task, episodes=args.episodes)
    start = time.perf_counter()
    data = record_demonstrations(config)
    save_dataset(Path(args.out), data)
    summary = dataset_summary(data, seconds=time.perf_counter() - start)
    print(json.dumps({"config": config.to_json(), **summary}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
