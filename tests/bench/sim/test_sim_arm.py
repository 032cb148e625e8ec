"""Arm embodiment: IK reaches a grid of TCP targets within 2 mm, joint limits hold, unreachable
targets are clipped and counted (never raise), the damped fallback works alone, the expert
solves Cup with the arm."""

import gymnasium
import numpy as np
import pytest

import bench.sim
from bench.errors import BenchError
from bench.geometry import mat_to_rotvec, pose, top_down_mat
from bench.sim.arm import ArmConfig, ArmRobot, damped_least_squares_step

pytestmark = pytest.mark.filterwarnings("ignore:.*Box observation space m.*:UserWarning")


def make(scene, robot=None, **kwargs):
    return gymnasium.make(bench.sim.ENV_IDS["cup"], scene=scene, obs_mode="state",
                          control="single", robot=robot or ArmRobot(), **kwargs)


def drive_to(env, goal, *, hold_frames=8):
    """Step the TCP target towards ``goal`` [4, 4] in <= 4 cm moves, then hold it."""
    info = env.unwrapped._info(executed=0)
    for _ in range(60):
        target = info["tcp_target"]
        delta = np.linalg.inv(target) @ goal
        step = delta[:3, 3]
        if np.linalg.norm(step) > 0.04:
            step = step / np.linalg.norm(step) * 0.04
        rot = mat_to_rotvec(delta[:3, :3])
        rot = rot if np.linalg.norm(rot) <= 0.4 else rot / np.linalg.norm(rot) * 0.4
        _, _, _, _, info = env.step(np.concatenate([step, rot, [0.11]]).astype(np.float32))
        if np.allclose(info["tcp_target"], goal, atol=1e-9):
            break
    for _ in range(hold_frames):
        _, _, _, _, info = env.step(np.array([0, 0, 0, 0, 0, 0, 0.11], np.float32))
    return info


def test_arm_reaches_a_grid_of_targets_within_2mm(small_scene):
    env = make(small_scene)
    env.reset(seed=0)
    robot = env.unwrapped.world.robot
    errors = []
    for x in (-0.15, 0.0, 0.15):
        for y in (-0.2, 0.0, 0.15):
            for z, yaw in ((0.08, 0.0), (0.25, 0.7)):
                goal = pose(top_down_mat(yaw), [x, y, z])
                drive_to(env, goal)
                tcp = robot.tcp_pose(env.unwrapped.world.data)
                errors.append(np.linalg.norm(tcp[:3, 3] - goal[:3, 3]))
                angle = np.linalg.norm(mat_to_rotvec(tcp[:3, :3].T @ goal[:3, :3]))
                assert angle < 0.01, (x, y, z, angle)
    assert max(errors) < 0.002, max(errors)
    assert robot.stats()["ik_fallbacks"] == 0
    env.close()


def test_joint_limits_hold_and_unreachable_targets_are_counted(small_scene):
    env = make(small_scene)
    env.reset(seed=0)
    robot = env.unwrapped.world.robot
    low, high = robot.joint_limits.T
    data = env.unwrapped.world.data
    # far outside the reach (the workspace box clips to 0.6 m above the table, the reach to a
    # sphere about the shoulder) and tilted: the arm stretches against its limits
    for goal in (pose(top_down_mat(2.5), [0.7, 0.5, 0.6]), pose(np.eye(3), [-0.7, 0.5, 0.6])):
        info = drive_to(env, goal, hold_frames=5)
        q = robot.joint_positions(data)
        assert np.all(np.isfinite(q))
        assert np.all(q >= low - 0.02) and np.all(q <= high + 0.02), (q, low, high)
        assert np.all(robot._q_cmd >= low) and np.all(robot._q_cmd <= high)
    stats = info["robot"]
    assert stats["ik_unreachable"] > 0
    # the raw IK step never leaves the limits, whatever the target
    rng = np.random.default_rng(0)
    for _ in range(20):
        target = pose(top_down_mat(rng.uniform(-3, 3)), rng.uniform(-1.5, 1.5, 3))
        q = robot.solve(target, rng.uniform(low, high), dt=1.0)
        assert np.all(q >= low) and np.all(q <= high)
    env.close()


def test_damped_fallback_alone_reaches_targets(small_scene):
    # an unknown QP solver makes every mink solve fail: the damped least-squares step runs
    env = make(small_scene, robot=ArmRobot(ArmConfig(solver="no-such-solver")))
    env.reset(seed=0)
    robot = env.unwrapped.world.robot
    goal = pose(top_down_mat(0.3), [0.1, -0.1, 0.12])
    drive_to(env, goal, hold_frames=12)
    tcp = robot.tcp_pose(env.unwrapped.world.data)
    assert np.linalg.norm(tcp[:3, 3] - goal[:3, 3]) < 0.002
    assert robot.stats()["ik_fallbacks"] == robot.stats()["ik_solves"] > 0
    env.close()


def test_damped_least_squares_matches_the_pseudo_inverse_at_zero_damping():
    rng = np.random.default_rng(1)
    jac, err = rng.normal(size=(6, 6)), rng.normal(size=6)
    np.testing.assert_allclose(damped_least_squares_step(jac, err, 0.0),
                               np.linalg.solve(jac, err), rtol=1e-9, atol=1e-9)


def test_expert_solves_cup_with_the_arm_deterministically(small_scene):
    from bench.policies import make_policy

    results = []
    for _ in range(2):
        env = gymnasium.make(bench.sim.ENV_IDS["cup"], scene=small_scene, obs_mode="state",
                             robot="arm6")
        policy = make_policy("expert", env)
        obs, info = env.reset(seed=2)
        policy.reset(seed=2)
        done = False
        while not done:
            obs, _, term, trunc, info = env.step(policy.act(obs, info))
            done = term or trunc
        results.append((info["success"], info["frame"],
                        env.unwrapped.world.data.qpos.copy()))
        env.close()
    assert results[0][0] and results[0][1] < 200
    assert results[0][1] == results[1][1]
    np.testing.assert_array_equal(results[0][2], results[1][2])


def test_bad_arm_inputs_are_one_line_errors(tmp_path):
    with pytest.raises(BenchError, match="neither a shipped arm"):
        ArmRobot(ArmConfig(model="franka.txt"))
    with pytest.raises(BenchError, match="not found"):
        ArmRobot(ArmConfig(model=str(tmp_path / "missing.xml")))
    robot_file = tmp_path / "arm.json"
    robot_file.write_text('{"model": "arm6", "reach_m": 1}')
    from bench.sim.robot import make_robot

    with pytest.raises(BenchError, match="unknown keys"):
        make_robot(str(robot_file))
    robot_file.write_text('{"model": "../outside.xml"}')
    with pytest.raises(BenchError, match="leaves"):
        make_robot(str(robot_file))


OWN_HAND = {
    "model": "data/arm6_own_hand.xml",
    "model_gripper": {"hand_body": "hand_base", "tcp_offset": [0.0, 0.0, 0.067],
                      "left_pad": "pad_l", "right_pad": "pad_r",
                      "finger_joints": ["finger_l", "finger_r"], "actuator": "grip",
                      "ctrl_open": 255.0, "ctrl_closed": 0.0, "max_opening": 0.1},
}


def test_gripper_from_the_model_grasps_with_its_own_pads(small_scene, tmp_path):
    import json
    import shutil
    from pathlib import Path

    from bench.policies import make_policy

    (tmp_path / "data").mkdir()
    shutil.copy(Path(__file__).with_name("data") / "arm6_own_hand.xml", tmp_path / "data")
    robot_file = tmp_path / "own_hand.json"
    robot_file.write_text(json.dumps(OWN_HAND))
    env = gymnasium.make(bench.sim.ENV_IDS["cup"], scene=small_scene, obs_mode="state",
                         robot=str(robot_file))
    robot = env.unwrapped.world.robot
    assert robot.max_opening == 0.1 and "unused_motor" not in str(robot.joint_names)
    policy = make_policy("expert", env)
    obs, info = env.reset(seed=1)
    assert robot.opening(env.unwrapped.world.data) == pytest.approx(0.1, abs=2e-3)
    policy.reset(seed=1)
    done, attached = False, False
    while not done:
        obs, _, term, trunc, info = env.step(policy.act(obs, info))
        attached |= info["grasp"]["attached"] == "cup"
        done = term or trunc
    assert attached and info["success"], info["failure"]
    env.close()
    bad = dict(OWN_HAND, model_gripper={**OWN_HAND["model_gripper"], "left_pad": "pad_x"})
    robot_file.write_text(json.dumps(bad))
    from bench.sim.robot import make_robot

    robot = make_robot(str(robot_file))
    with pytest.raises(BenchError, match="no geom 'pad_x'"):
        gymnasium.make(bench.sim.ENV_IDS["cup"], scene=small_scene, obs_mode="state",
                       robot=robot)


def test_urdf_arm_reaches_targets(small_scene):
    from pathlib import Path

    urdf = Path(__file__).with_name("data") / "arm6.urdf"
    config = ArmConfig(model=str(urdf), ee_body="wrist_3", ee_offset=(0.0, 0.0, 0.14),
                       seed_joints=(0.0, 0.5, 1.6, 0.0, 1.0, 0.0))
    env = make(small_scene, robot=ArmRobot(config))
    env.reset(seed=0)
    robot = env.unwrapped.world.robot
    assert len(robot.joint_names) == 6
    goals = (pose(top_down_mat(0.4), [0.1, -0.1, 0.1]), pose(top_down_mat(-0.3), [-0.1, 0.1, 0.2]))
    for goal in goals:
        drive_to(env, goal)
        tcp = robot.tcp_pose(env.unwrapped.world.data)
        assert np.linalg.norm(tcp[:3, 3] - goal[:3, 3]) < 0.002
    env.close()
