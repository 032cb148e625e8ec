"""Policy queries per second: through a ``bench serve`` websocket server vs in-process.

``bench serve`` runs on the policy-server kit (``splatserve``); the client is the bench's
``openpi`` policy, configured from the server's capability handshake.

Both sides are pinned to one CPU core (the client and the server process share it, as a
policy on the same machine would). The policy is ``random`` (negligible compute), so the
numbers are the transport cost: msgpack-numpy encoding of the observation (one
``--image`` x ``--image`` wrist image + 8-D proprio + prompt), a loopback websocket round
trip and decoding the ``[32, 7]`` chunk. Then one Cup rollout (state observations,
``--frames`` frames, 16 executed rows per query) both ways, alternated, fastest of three:
the overhead per rollout, and the cost of episode control (the ``episode_start`` /
``episode_end`` messages: the same rollout with ``episode_control="off"``).

    python benchmarks/bench_policy_server.py [--queries 2000] [--image 128] [--frames 600]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time

import numpy as np


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(port: int) -> None:
    for _ in range(600):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError("server did not start")


def _rate(policy, obs, info, queries: int) -> float:
    policy.reset(seed=0)
    for _ in range(20):  # warm-up (connection, allocator)
        policy.act(obs, info)
    start = time.perf_counter()
    for _ in range(queries):
        policy.act(obs, info)
    return queries / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--image", type=int, default=128)
    parser.add_argument("--frames", type=int, default=600)
    parser.add_argument("--core", type=int, default=0)
    args = parser.parse_args()
    os.sched_setaffinity(0, {args.core})
    os.environ.setdefault("MUJOCO_GL", "egl")
    import bench.sim
    from bench.policies import make_policy
    from bench.policies.base import policy_observation
    from bench.scene.sample import make_sample_scene
    from bench.sim.rollout import run_episode

    scene = make_sample_scene(seed=0, n_gaussians=200)
    env = bench.sim.make_env("cup", scene, obs_mode="state", background="none",
                             max_frames=args.frames)
    raw, info = env.reset(seed=0)
    rng = np.random.default_rng(0)
    raw = {**raw, "wrist_rgb": rng.integers(0, 256, (args.image, args.image, 3), np.uint8)}
    obs = policy_observation(raw, env)

    port = _free_port()
    server = subprocess.Popen(
        ["taskset", "-c", str(args.core), sys.executable, "-m", "bench.cli", "serve",
         "--policy", "random", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait(port)
        local = make_policy("random", env, seed=0)
        remote = make_policy("openpi", env, port=port)
        bare = make_policy("openpi", env, port=port, episode_control="off")
        local_qps = _rate(local, obs, info, args.queries)
        remote_qps = _rate(remote, obs, info, args.queries)
        contenders = (("in-process", local), ("websocket", remote), ("no control", bare))
        times = {name: (np.inf, 0, 0.0) for name, _ in contenders}
        for _ in range(3):  # alternate, keep the fastest of three (shared machine)
            for name, policy in contenders:
                latencies = []
                record, _, wall = run_episode(env, policy, init_index=0, latencies=latencies)
                if wall < times[name][0]:
                    times[name] = (wall, record.policy_queries, float(np.sum(latencies)))
        remote.close()
        bare.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
        env.close()
    print(f"one core (#{args.core}), image {args.image}x{args.image}, {args.queries} queries")
    print(f"in-process: {local_qps:10.0f} queries/s  ({1000 / local_qps:.3f} ms/query)")
    print(f"websocket : {remote_qps:10.0f} queries/s  ({1000 / remote_qps:.3f} ms/query)")
    print(f"ratio in-process / websocket: {local_qps / remote_qps:.1f}x")
    (wl, ql, sl), (wr, qr, sr) = times["in-process"], times["websocket"]
    print(f"rollout ({args.frames} frames, {ql} queries): wall in-process {wl:.3f} s, "
          f"websocket {wr:.3f} s (difference {wr - wl:+.3f} s); time inside policy queries "
          f"{sl:.1f} ms vs {sr:.1f} ms = {sr - sl:+.1f} ms per rollout "
          f"({(sr - sl) / max(qr, 1):.2f} ms per query)")
    wn, qn, sn = times["no control"]
    print(f"episode control: time inside policy queries {sr:.1f} ms with, {sn:.1f} ms without "
          f"({sr - sn:+.1f} ms per rollout; the episode_end message is outside the queries), "
          f"wall {wr:.3f} s vs {wn:.3f} s")


if __name__ == "__main__":
    main()
