"""Task-file schema: a box-mesh task behaves like the same box primitive, every bad field is a
one-line error, bundle objects and bundle task files load, TOML equals JSON, paths stay inside."""

import copy
import json

import numpy as np
import pytest

import bench.sim
from bench.errors import BenchError
from bench.policies import make_policy
from bench.sim.objects import Box, Mesh
from bench.sim.taskfile import load_task_file

pytestmark = pytest.mark.filterwarnings("ignore:.*Box observation space m.*:UserWarning")

BOX_TASK = {
    "format": "splatbench-task/1",
    "name": "cube",
    "instruction": "put the cube on the plate",
    "objects": {
        "cube": {"shape": {"type": "box", "size": [0.04, 0.05, 0.04]}, "mass": 0.1,
                 "friction": 1.0, "rgba": [0.8, 0.2, 0.2, 1.0]},
        "plate": {"shape": {"type": "cylinder", "radius": 0.09, "height": 0.012},
                  "mass": 0.3, "friction": 0.8},
    },
    "actor": "cube",
    "receptacle": "plate",
    "receptacle_pose": {"x": 0.0, "y": 0.14, "yaw_deg": 0.0},
    "grid": {"x": {"range": [-0.1, 0.1], "count": 3}, "y": [-0.2, -0.1],
             "yaw_deg": {"range": [0, 90], "count": 3}, "seed": 3},
    "success": {"rule": "place_in", "params": {"rest_speed": 0.02}},
    "grasp_height": 0.02,
    "time_limit_frames": 400,
    "chunking": {"chunk_size": 32, "execute": 16},
}


def write(path, data):
    path.write_text(json.dumps(data))
    return path


def box_mesh_task(tmp_path, *, suffix="obj"):
    import trimesh

    (tmp_path / "meshes").mkdir(exist_ok=True)
    trimesh.creation.box(extents=[0.04, 0.05, 0.04]).export(tmp_path / f"meshes/cube.{suffix}")
    data = copy.deepcopy(BOX_TASK)
    cube = data["objects"]["cube"]
    del cube["shape"]
    cube.update({"mesh": f"meshes/cube.{suffix}", "collision": "hull"})
    return write(tmp_path / "cube_mesh.json", data)


def run_expert(env, condition):
    policy = make_policy("expert", env)
    obs, info = env.reset(seed=condition)
    policy.reset(seed=condition)
    settled = info["objects"]["cube"]["pos"].copy()
    done = False
    while not done:
        obs, _, term, trunc, info = env.step(policy.act(obs, info))
        done = term or trunc
    return settled, info


@pytest.mark.parametrize("suffix", ["obj", "stl", "ply", "glb"])
def test_mesh_formats_load_as_the_box(tmp_path, suffix):
    task = load_task_file(box_mesh_task(tmp_path, suffix=suffix))
    shape = task.actor.shape
    assert isinstance(shape, Mesh) and shape.source == f"meshes/cube.{suffix}"
    np.testing.assert_allclose(shape.extent, [0.04, 0.05, 0.04], atol=1e-9)
    assert task.actor.resting_height() == pytest.approx(0.02)
    assert task.actor.footprint_radius() == pytest.approx(np.hypot(0.04, 0.05) / 2)


def test_box_mesh_task_behaves_like_the_box_primitive(small_scene, tmp_path):
    primitive = load_task_file(write(tmp_path / "cube.json", BOX_TASK))
    mesh = load_task_file(box_mesh_task(tmp_path))
    assert isinstance(primitive.actor.shape, Box)
    outcomes = {}
    for label, task in (("primitive", primitive), ("mesh", mesh)):
        env = bench.sim.make_env(task, small_scene, obs_mode="state")
        outcomes[label] = [run_expert(env, c) for c in (0, 4)]
        env.close()
    for (p_settled, p_info), (m_settled, m_info) in zip(outcomes["primitive"], outcomes["mesh"],
                                                        strict=True):
        np.testing.assert_allclose(m_settled, p_settled, atol=5e-4)  # same resting pose
        assert p_info["success"] and m_info["success"]
        assert abs(p_info["frame"] - m_info["frame"]) <= 16  # within one executed chunk
        np.testing.assert_allclose(m_info["objects"]["cube"]["pos"],
                                   p_info["objects"]["cube"]["pos"], atol=0.01)


def test_grid_ranges_count_and_seed(tmp_path):
    data = copy.deepcopy(BOX_TASK)
    data["grid"]["count"] = 10
    task = load_task_file(write(tmp_path / "t.json", data))
    grid = task.grid
    assert grid.xs == (-0.1, 0.0, 0.1) and grid.yaws_deg == (0.0, 45.0, 90.0)
    assert grid.size == 10 and grid.conditions().shape == (10, 3)
    beyond = grid.condition(10)  # drawn from default_rng([seed, index])
    rng = np.random.default_rng([3, 10])
    assert beyond[0] == rng.uniform(-0.1, 0.1)


def test_toml_equals_json(tmp_path):
    toml = """
format = "splatbench-task/1"
name = "cube"
instruction = "put the cube on the plate"
actor = "cube"
receptacle = "plate"
grasp_height = 0.02
time_limit_frames = 400
[objects.cube]
shape = { type = "box", size = [0.04, 0.05, 0.04] }
mass = 0.1
friction = 1.0
rgba = [0.8, 0.2, 0.2, 1.0]
[objects.plate]
shape = { type = "cylinder", radius = 0.09, height = 0.012 }
mass = 0.3
friction = 0.8
[receptacle_pose]
x = 0.0
y = 0.14
yaw_deg = 0.0
[grid]
x = { range = [-0.1, 0.1], count = 3 }
y = [-0.2, -0.1]
yaw_deg = { range = [0, 90], count = 3 }
seed = 3
[success]
rule = "place_in"
params = { rest_speed = 0.02 }
[chunking]
chunk_size = 32
execute = 16
"""
    (tmp_path / "cube.toml").write_text(toml)
    a = load_task_file(tmp_path / "cube.toml")
    b = load_task_file(write(tmp_path / "cube.json", BOX_TASK))
    for field in ("name", "actor", "receptacle", "receptacle_xy", "grid", "grasp_height",
                  "execute", "max_frames", "description", "rule", "rule_params"):
        assert getattr(a, field) == getattr(b, field), field


BAD_FIELDS = [
    (lambda d: d.update(format="splatbench-task/9"), "format"),
    (lambda d: d.update(colour="red"), "unknown keys"),
    (lambda d: d.pop("grid"), "missing"),
    (lambda d: d.update(name="my task"), "not a valid name"),
    (lambda d: d.update(actor="mug"), "not in objects"),
    (lambda d: d.update(receptacle="cube"), "is the actor"),
    (lambda d: d["objects"].update(extra={"shape": {"type": "box", "size": [0.1, 0.1, 0.1]},
                                          "mass": 1}), "neither actor nor receptacle"),
    (lambda d: d["objects"]["cube"].pop("mass"), "mass: missing"),
    (lambda d: d["objects"]["cube"].update(mass=-1), "must be > 0"),
    (lambda d: d["objects"]["cube"].update(friction="high"), "finite number"),
    (lambda d: d["objects"]["cube"].update(rgba=[1, 0, 0]), "list of 4"),
    (lambda d: d["objects"]["cube"].update(rgba=[2, 0, 0, 1]), "leaves [0, 1]"),
    (lambda d: d["objects"]["cube"].update(decor="hat"), "decor"),
    (lambda d: d["objects"]["cube"].update(scale=2), "mesh objects only"),
    (lambda d: d["objects"]["cube"].update(mesh="a.obj"), "exactly one of"),
    (lambda d: d["objects"]["cube"].update(shape={"type": "sphere"}), "unknown"),
    (lambda d: d["objects"]["cube"].update(shape={"type": "box"}), "lacks"),
    (lambda d: d["objects"]["cube"].update(shape={"type": "box", "size": [1, 1]}), "list of 3"),
    (lambda d: d["objects"]["cube"].update(shape={"type": "pen", "radius": 0.01, "length": 0.01}),
     "length must exceed"),
    (lambda d: d["objects"]["cube"].update(bundle_object="mug"), "takes no"),
    (lambda d: d["objects"].update(cube={"bundle_object": "mug"}), "needs a scene bundle"),
    (lambda d: d["grid"].update(x=[]), "non-empty"),
    (lambda d: d["grid"].update(x=[0.1, 0.1]), "repeats"),
    (lambda d: d["grid"].update(x={"range": [0.1, -0.1], "count": 2}), "reversed"),
    (lambda d: d["grid"].update(x={"range": [0, 1]}), "needs 'range' and 'count'"),
    (lambda d: d["grid"].update(count=100), "exceeds"),
    (lambda d: d["grid"].update(seed=-1), ">= 0"),
    (lambda d: d["grid"].update(z=[0]), "unknown keys"),
    (lambda d: d["success"].update(rule="stack_on"), "not a progress archetype"),
    (lambda d: d["success"].update(params={"lift": 1}), "unknown keys"),
    (lambda d: d["success"].update(params={"rest_speed": 0}), "must be > 0"),
    (lambda d: d["success"].update(params={"hold_steps": 1.5}), "whole number"),
    (lambda d: d["chunking"].update(execute=40), "exceeds chunk_size"),
    (lambda d: d["chunking"].update(chunk_size=0), ">= 1"),
    (lambda d: d.update(time_limit_frames=True), "whole number"),
    (lambda d: d.update(grasp_height=-0.01), ">= 0"),
    (lambda d: d["receptacle_pose"].update(z=0.1), "unknown keys"),
    (lambda d: d.update(instruction=3), "must be a string"),
    (lambda d: d.update(home={"yaw": 90}), "unknown keys"),
    (lambda d: d.update(home={"yaw_deg": "back"}), "home.yaw_deg"),
]


@pytest.mark.parametrize(("edit", "message"), BAD_FIELDS)
def test_each_bad_field_is_a_one_line_error(tmp_path, edit, message):
    data = copy.deepcopy(BOX_TASK)
    edit(data)
    path = write(tmp_path / "bad.json", data)
    with pytest.raises(BenchError, match=None) as err:
        load_task_file(path)
    text = str(err.value)
    assert message in text and "\n" not in text and str(path) in text


@pytest.mark.parametrize(
    ("mesh_entry", "message"),
    [
        ({"mesh": "/etc/cube.obj"}, "absolute path"),
        ({"mesh": "../cube.obj"}, "leaves"),
        ({"mesh": "meshes/none.obj"}, "not found"),
        ({"mesh": "meshes/cube.txt"}, "not a mesh file"),
        ({"mesh": "meshes/cube.obj", "scale": 0}, "scale"),
        ({"mesh": "meshes/cube.obj", "collision": "voxels"}, "neither 'hull' nor a list"),
        ({"mesh": "meshes/cube.obj", "collision": ["../p.obj"]}, "leaves"),
        ({"mesh": "meshes/cube.obj", "origin": "centroid"}, "origin"),
        ({"mesh": "meshes/cube.obj", "texture": "meshes/tex.jpg"}, "texture"),
        ({"mesh": "meshes/flat.obj"}, "degenerate"),
    ],
)
def test_bad_mesh_entries(tmp_path, mesh_entry, message):
    import trimesh

    box_mesh_task(tmp_path)
    (tmp_path / "meshes/cube.txt").write_text("x")
    (tmp_path / "meshes/tex.jpg").write_bytes(b"x")
    flat = trimesh.Trimesh(vertices=[[0, 0, 0], [1, 0, 0], [0, 1, 0]], faces=[[0, 1, 2]])
    flat.export(tmp_path / "meshes/flat.obj")
    data = copy.deepcopy(BOX_TASK)
    data["objects"]["cube"] = {"mass": 0.1, **mesh_entry}
    with pytest.raises(BenchError) as err:
        load_task_file(write(tmp_path / "bad.json", data))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_user_convex_decomposition_is_used_for_collision(tmp_path):
    import trimesh

    (tmp_path / "meshes").mkdir()
    # an L-shaped object: visual mesh = the union, collision = two convex boxes
    a = trimesh.creation.box(extents=[0.1, 0.03, 0.03])
    b = trimesh.creation.box(extents=[0.03, 0.08, 0.03])
    b.apply_translation([0.035, 0.055, 0.0])
    trimesh.util.concatenate([a, b]).export(tmp_path / "meshes/l.obj")
    a.export(tmp_path / "meshes/l_0.obj")
    b.export(tmp_path / "meshes/l_1.obj")
    data = copy.deepcopy(BOX_TASK)
    data["objects"]["cube"] = {"mesh": "meshes/l.obj", "mass": 0.2,
                               "collision": ["meshes/l_0.obj", "meshes/l_1.obj"]}
    shape = load_task_file(write(tmp_path / "l.json", data)).actor.shape
    assert len(shape.parts) == 2 and all(len(p) == 8 for p in shape.parts)


def test_bundle_objects_and_bundle_task_files(small_scene, tmp_path):
    import trimesh

    from bench.scene.bundle import load_scene, save_scene

    root = tmp_path / "room"
    save_scene(small_scene, root)
    (root / "objects").mkdir()
    trimesh.creation.box(extents=[0.04, 0.05, 0.04]).export(root / "objects/cube.stl")
    (root / "objects/objects.json").write_text(json.dumps({"objects": {
        "cube": {"mesh": "cube.stl", "mass": 0.1, "rgba": [0.8, 0.2, 0.2, 1.0]}}}))
    (root / "tasks").mkdir()
    data = copy.deepcopy(BOX_TASK)
    data["name"] = "bundle-cube"
    data["objects"]["cube"] = {"bundle_object": "cube", "mass": 0.12}
    write(root / "tasks/bundle-cube.json", data)
    scene = load_scene(root)
    env = bench.sim.make_env("bundle-cube", scene, obs_mode="state")
    task = env.unwrapped.task
    assert isinstance(task.actor.shape, Mesh) and task.actor.mass == 0.12
    _, info = run_expert(env, 1)
    assert info["success"]
    env.close()
    data["objects"]["cube"] = {"bundle_object": "mug"}
    write(root / "tasks/bad.json", data)
    with pytest.raises(BenchError, match="not in the bundle"):
        load_task_file(root / "tasks/bad.json")


@pytest.mark.parametrize("how", ["embedded-glb", "obj-plus-png"])
def test_textured_mesh_is_drawn_with_its_texture(small_scene, tmp_path, how):
    import trimesh
    from PIL import Image

    (tmp_path / "meshes").mkdir()
    box = trimesh.creation.box(extents=[0.06, 0.06, 0.04])
    box.unmerge_vertices()
    uv = (box.vertices[:, :2] - box.vertices[:, :2].min(0)) / np.ptp(box.vertices[:, :2], 0)
    green = Image.new("RGB", (8, 8), (0, 255, 0))
    box.visual = trimesh.visual.TextureVisuals(uv=uv, image=green)
    data = copy.deepcopy(BOX_TASK)
    if how == "embedded-glb":
        box.export(tmp_path / "meshes/cube.glb")
        data["objects"]["cube"] = {"mesh": "meshes/cube.glb", "mass": 0.1}
    else:
        # the OBJ's own material is blue; the task file's texture (green) overrides it
        box.visual = trimesh.visual.TextureVisuals(uv=uv, image=Image.new("RGB", (8, 8),
                                                                          (0, 0, 255)))
        box.export(tmp_path / "meshes/cube.obj")
        green.save(tmp_path / "meshes/green.png")
        data["objects"]["cube"] = {"mesh": "meshes/cube.obj", "mass": 0.1,
                                   "texture": "meshes/green.png"}
    data["objects"]["cube"]["rgba"] = [1.0, 0.0, 0.0, 1.0]  # ignored where the texture applies
    task = load_task_file(write(tmp_path / "tex.json", data))
    assert task.actor.shape.texture is not None
    env = bench.sim.make_env(task, small_scene, obs_mode="state", render_mode="rgb_array",
                             background="none")
    env.reset(seed=4)
    assert env.unwrapped.world.model.ntex == 1
    image = env.render().astype(int)
    greenish = (image[..., 1] > 120) & (image[..., 0] < 60) & (image[..., 2] < 60)
    reddish = (image[..., 0] > 120) & (image[..., 1] < 60) & (image[..., 2] < 60)
    assert greenish.sum() > 30 and reddish.sum() == 0
    env.close()


@pytest.mark.parametrize("ext", ["obj", "glb"])
def test_texture_orientation_follows_the_uv_convention(small_scene, tmp_path, ext):
    """v = 1 is the top row of the texture image (OBJ / trimesh convention, glTF converted)."""
    import trimesh
    from PIL import Image

    (tmp_path / "meshes").mkdir()
    box = trimesh.creation.box(extents=[0.08, 0.08, 0.02])
    box.unmerge_vertices()
    uv = (box.vertices[:, :2] - box.vertices[:, :2].min(0)) / np.ptp(box.vertices[:, :2], 0)
    image = np.zeros((8, 8, 3), np.uint8)
    image[:4], image[4:] = (255, 0, 0), (0, 255, 0)  # top rows red, bottom rows green
    box.visual = trimesh.visual.TextureVisuals(uv=uv, image=Image.fromarray(image))
    box.export(tmp_path / f"meshes/cube.{ext}")
    data = copy.deepcopy(BOX_TASK)
    data["objects"]["cube"] = {"mesh": f"meshes/cube.{ext}", "mass": 0.1}
    data["grid"] = {"x": [0.0], "y": [-0.1], "yaw_deg": [0.0]}
    # a pinhole 0.5 m above the cube looking straight down; image up = world +y
    rig = {"cameras": [{"name": "top", "mount": "world",
                        "pose": [[1, 0, 0, 0], [0, -1, 0, -0.1], [0, 0, -1, 0.5], [0, 0, 0, 1]],
                        "calibration": {"model": "pinhole", "K": [[400, 0, 64], [0, 400, 64],
                                                                  [0, 0, 1]],
                                        "width": 128, "height": 128}}]}
    write(tmp_path / "rig.json", rig)
    env = bench.sim.make_env(load_task_file(write(tmp_path / "t.json", data)), small_scene,
                             cameras=str(tmp_path / "rig.json"), background="none")
    obs, _ = env.reset(seed=0)
    img = obs["top_rgb"].astype(int)
    upper, lower = img[30:60, 50:78].mean((0, 1)), img[70:98, 50:78].mean((0, 1))
    assert upper[0] > 200 > upper[1] and lower[1] > 200 > lower[0]  # +y (v = 1) is red
    env.close()


def test_pick_up_rule_succeeds_when_the_expert_lifts(small_scene, tmp_path):
    data = copy.deepcopy(BOX_TASK)
    data["success"] = {"rule": "pick_up", "params": {"lift_dz": 0.05}}
    task = load_task_file(write(tmp_path / "lift.json", data))
    env = bench.sim.make_env(task, small_scene, obs_mode="state")
    _, info = run_expert(env, 2)
    state = info["state"]
    assert info["success"] and info["progress"] == 1.0
    assert state.held("cube")  # still carried: success came from the lift, not a placement
    assert state.objects["cube"].pos[2] >= 0.02 + 0.05
    env.close()


def test_push_to_target_is_in_the_table_frame(tmp_path):
    from bench.geometry import pose, yaw_mat
    from bench.sim.state import ObjectState, TaskState

    data = copy.deepcopy(BOX_TASK)
    data["success"] = {"rule": "push_to", "params": {"target_xy": [0.1, 0.0],
                                                      "tolerance": 0.02}}
    task = load_task_file(write(tmp_path / "push.json", data))
    # a table rotated 90 degrees and shifted: table (0.1, 0) is world (1.0, 0.6)
    world_from_table = pose(yaw_mat(np.pi / 2), [1.0, 0.5, 0.0])
    predicate = task.success_for(world_from_table)

    def state(xy, speed=0.0, held=False):
        cube = ObjectState(pos=np.array([*xy, 0.02]), quat=np.array([1.0, 0, 0, 0]),
                           linvel=np.array([speed, 0, 0]))
        plate = ObjectState(pos=np.array([0.0, 0.0, 0.006]), quat=np.array([1.0, 0, 0, 0]))
        return TaskState({"cube": cube, "plate": plate}, frozenset(),
                         "cube" if held else None, np.zeros(3), np.array([1.0, 0, 0, 0]), 0.1)

    assert predicate(state([1.0, 0.61]))
    assert not predicate(state([1.0, 0.63]))  # 3 cm off
    assert not predicate(state([1.0, 0.6], speed=0.2))  # still moving
    assert not predicate(state([1.0, 0.6], held=True))
    assert not task.success(state([1.0, 0.6]))  # unbound: table frame == world
    from bench.sim.task_progress import progress_spec

    spec = progress_spec(task, world_from_table=world_from_table)
    assert spec.name == "push_to(cube, [1, 0.6])"


def test_home_yaw_turns_the_reset_pose_and_the_expert_still_succeeds(small_scene, tmp_path):
    from bench.geometry import top_down_mat
    from bench.sim import make_env

    data = copy.deepcopy(BOX_TASK)
    data["home"] = {"yaw_deg": 90.0}
    task = load_task_file(write(tmp_path / "home.json", data))
    assert task.home_yaw_deg == 90.0
    assert load_task_file(write(tmp_path / "plain.json", BOX_TASK)).home_yaw_deg == 0.0
    env = make_env(str(tmp_path / "home.json"), small_scene, obs_mode="state")
    env.reset(seed=0)
    world = env.unwrapped.world
    np.testing.assert_array_equal(world.home[:3, :3], top_down_mat(world.table.yaw + np.pi / 2))
    tcp = world.robot.tcp_pose(world.data)  # the reset puts the tool there
    np.testing.assert_allclose(tcp[:3, :3], world.home[:3, :3], atol=1e-6)
    _, info = run_expert(env, 0)
    env.close()
    assert info["success"]
