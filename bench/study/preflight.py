"""Everything a study run can refuse, checked before ``--out`` is created.

:func:`check_study` runs after the spec parsed and before
:func:`bench.study.runner.open_output` touches the output directory:

* every name used as a path part (study, scene, condition, task, policy)
  matches :data:`bench.safety.NAME_PATTERN`;
* the planned number of rollouts (:func:`bench.study.plan.count_rollouts`) is
  below :data:`MAX_ROLLOUTS` (the message shows the product);
* every given bundle's ``scene.json`` is valid and closed (paths stay inside
  the bundle), its background file's header reads, and the camera files the
  quality stage reads (``test`` and ``obs_probe`` of each clean scene) load
  and hold cameras of a sane size;
* every scene (given bundles loaded, sample rooms generated) passes the
  rollout stage's table-registration check;
* every scene's held-out ``captures`` show the clean scene from their cameras in
  the frame the camera file states (:func:`check_capture_frame`: a wrong frame or
  unrelated images are refused, a low clean Test PSNR is warned about);
* every remote (``openpi``) policy's server, when it answers, declares capabilities the
  study's envs meet (:func:`check_policy_servers`: its required cameras are in the rig,
  its action layout is a 7-D end-effector action): connect, read the metadata, close;
* ``--out`` neither equals, contains nor lies inside any input;
* the free space at ``--out`` covers an estimate of what the run writes;
* OBS-Policy's frames (the policies' ``image_size``) are no smaller than every NR
  scorer of the study accepts (:func:`check_obs_policy_frames`; NVS-SQA needs 69 px),
  checked last so the inputs' own refusals name their problem first.
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.safety import check_image_size, check_name, check_output_path
from bench.study.plan import count_rollouts, domain_trials
from bench.study.spec import CLEAN, StudySpec

#: Most rollouts one study may plan (sim + real); beyond it the plan itself is the mistake.
MAX_ROLLOUTS = 1_000_000
#: Bytes per Gaussian of a written background (INRIA PLY layout, SH degree 3, normals).
PLY_BYTES_PER_GAUSSIAN = 62 * 4
#: Most Gaussians of one generated sample room.
MAX_SAMPLE_GAUSSIANS = 20_000_000
#: Bytes per stored rollout row (SQLite + WAL + CSV export), generous.
ROW_BYTES = 2048
#: Fixed overhead: tables, figures, manifests, the database itself.
BASE_BYTES = 64 << 20
#: Mean clean Test PSNR (dB) of a scene's captures below which the study refuses: the
#: images do not show the clean scene from those cameras. Measured on the sample room's
#: own renders read in the wrong frame: 11.4-11.7 dB (8 / 4 views; views 10.7-12.9 dB);
#: in the right frame 57 dB at the check's 256 px (inf at full size); real captures of
#: real reconstructions score 20-30 dB.
CAPTURE_REFUSE_DB = 12.0
#: Below this (and above the refusal) the study runs but warns with the number; here the
#: poses are also tried in the other frame.
CAPTURE_WARN_DB = 18.0
#: The other frame wins when it scores at least this much more (4x lower MSE) and itself
#: reaches CAPTURE_WARN_DB: the file states (or defaults to) the wrong frame.
CAPTURE_FRAME_MARGIN_DB = 6.0


class CaptureWarning(UserWarning):
    """Captures that score a low clean Test PSNR (the study runs; the number is shown)."""


class PolicyServerWarning(UserWarning):
    """A policy server that cannot be reached before the run (its rollouts retry)."""


def check_names(spec: StudySpec) -> None:
    """Refuse a study, scene, condition, task or policy name that is not a safe path part."""
    check_name(spec.name, what="study name")
    for scene in spec.scene_names:
        check_name(scene, what="scene name")
    for cond in spec.all_conditions:
        check_name(cond, what="condition name")
    for task in spec.tasks:
        check_name(task, what="task name")
        for policy in spec.policies[task]:
            if ":" not in policy:  # `module:factory` entry points are not used as paths
                check_name(policy, what=f"policy name of task {task!r}")


def check_size(spec: StudySpec) -> int:
    """Refuse a plan above :data:`MAX_ROLLOUTS`; returns the planned count."""
    if spec.sample_gaussians > MAX_SAMPLE_GAUSSIANS:
        raise BenchError(f"sample_gaussians {spec.sample_gaussians:,} exceeds the limit of "
                         f"{MAX_SAMPLE_GAUSSIANS:,} ({MAX_SAMPLE_GAUSSIANS:,} x "
                         f"{PLY_BYTES_PER_GAUSSIAN} B = "
                         f"{MAX_SAMPLE_GAUSSIANS * PLY_BYTES_PER_GAUSSIAN / 2**30:.1f} GiB per "
                         "room); lower it")
    check_image_size(*spec.image_size, what="image_size")
    total = count_rollouts(spec)  # counted per cell: no list of 10^9 trials is built
    if total > MAX_ROLLOUTS:
        raise BenchError(
            f"the spec plans 2 policies x {len(spec.scene_names)} scenes x {len(spec.tasks)} "
            f"tasks x ({len(spec.all_conditions)} conditions x {domain_trials(spec, 'sim')} "
            f"trials + {domain_trials(spec, 'real')} real trials) = {total:,} rollouts, above "
            f"the limit of {MAX_ROLLOUTS:,}; lower trials or split the study")
    return total


def check_obs_policy_frames(spec: StudySpec) -> None:
    """Refuse OBS-Policy frames smaller than an NR scorer of the study accepts.

    The frames are the policies' own wrist images (``image_size``); scoring them happens
    after every rollout, so a scorer that cannot read them must stop the study before it runs.
    """
    from bench.study.obs_policy import obs_policy_enabled
    from metrics.registry import scorer_info

    if not obs_policy_enabled(spec):
        return
    height, width = spec.image_size
    for name in spec.metrics:
        info = scorer_info(name)
        if info.mode == "NR" and min(height, width) < info.min_size:
            raise BenchError(
                f"obs_policy_every {spec.obs_policy_every} scores the policies' {height}x{width} "
                f"wrist frames with {name}, which needs at least {info.min_size}x"
                f"{info.min_size} pixels; set obs_policy_every 0 (no OBS-Policy), raise "
                f"image_size, or drop {name} from metrics")


def _bundle_inputs(spec: StudySpec) -> list[tuple[str, str, Path, bool]]:
    """(what, scene, bundle dir, is clean) of every given bundle."""
    given = [(f"scene {name!r}", name, Path(path), True) for name, path in spec.scenes.items()]
    given += [(f"extra condition {cond!r} of scene {name!r}", name, Path(path), False)
              for cond, per_scene in spec.extra_conditions.items()
              for name, path in per_scene.items()]
    return given


def check_bundles(spec: StudySpec) -> tuple[list[Path], int]:
    """Read every given bundle's scene.json, background header and the cameras scoring needs.

    Returns:
        Every input path the run reads, and the bytes of the given backgrounds.
    """
    from bench.scene.bundle import read_scene_spec
    from bench.scene.camera_files import load_cameras
    from bench.scene.ply import read_ply_header

    inputs: list[Path] = []
    background_bytes = 0
    for what, scene, root, clean in _bundle_inputs(spec):
        try:
            bundle, background = read_scene_spec(root)
            if not background.is_file():
                raise BenchError(f"background {background} does not exist")
            if background.suffix.lower() == ".ply":
                read_ply_header(background)
            background_bytes += background.stat().st_size
            inputs += [root, background]
            # Test cameras come from the held-out capture when there is one; a scene without
            # obs_probe cameras gets the default probe orbit (runner.probe_cameras)
            roles = ("test", "obs_probe") if clean else ()
            roles = [r for r in roles if not (r == "test" and scene in spec.captures)
                     and not (r == "obs_probe" and r not in bundle.cameras)]
            for role in roles:
                if role not in bundle.cameras:
                    raise BenchError(f"scene.json has no {role!r} camera role (the quality stage "
                                     f"renders it); add \"cameras\": {{\"{role}\": ...}}")
                path = root / bundle.cameras[role]
                cameras = load_cameras(path)
                if not cameras:
                    raise BenchError(f"camera file {path} of role {role!r} holds no cameras")
                for cam in cameras:
                    check_image_size(cam.height, cam.width, what=f"camera {cam.name!r} of {path}")
                    if role == "test" and cam.name:  # captured images are saved by this name
                        check_name(cam.name, what=f"camera name in {path}")
                inputs.append(path)
        except BenchError as exc:
            raise BenchError(f"{what}: {exc}") from None
    return inputs, background_bytes


def check_tables(spec: StudySpec) -> None:
    """The rollout stage's table-registration check, on every scene, before ``--out`` exists.

    Loads each given bundle (and generates each sample room) once; the env refuses a
    scene whose table lies out of view of the background, and finding that after
    hours of scoring would strand the output. The clean bundle of a scene with
    ``captures`` is then reused by :func:`check_capture_frame`.
    """
    import dataclasses

    from bench.scene.bundle import load_scene
    from bench.scene.sample import make_sample_scene
    from bench.sim.config import EnvConfig
    from bench.sim.env import check_table_registration
    from bench.sim.world import TableGeometry

    minimum = EnvConfig().min_table_gaussians
    scenes = [(f"sample scene {name!r}", name, True, lambda n=name, seed=seed:
               dataclasses.replace(make_sample_scene(seed=seed, n_gaussians=spec.sample_gaussians),
                                   name=n))
              for name, seed in spec.sample_scenes.items()]
    scenes += [(what, scene, clean, lambda root=root: load_scene(root))
               for what, scene, root, clean in _bundle_inputs(spec)]
    for what, scene, clean, load in scenes:
        try:
            bundle = load()
            table = TableGeometry.from_scene_table(bundle.require_table())
            check_table_registration(bundle, table, minimum=minimum)
        except BenchError as exc:
            hint = "; raise sample_gaussians" if what.startswith("sample") else ""
            raise BenchError(f"{what}: {exc}{hint}") from None
        if clean and scene in spec.captures:
            check_capture_frame(spec, scene, bundle)


def _frame_fix(fit: Any, frame: str) -> str:
    """How to make the capture's camera file say ``frame``."""
    if fit.kind == "json":
        return f'set "frame": "{frame}" in every camera entry of {fit.source}'
    if fit.kind == "transforms":
        return f'set the top-level "frame": "{frame}" in {fit.source}'
    if fit.kind == "colmap":
        return (f"a COLMAP model is read in the splat frame: convert it (bench cameras convert "
                f'{fit.source} cameras.json) and set "frame": "{frame}" in every entry')
    return ("a capture manifest is in the splat frame of the reconstruction trained from it: "
            "pair the scene with that reconstruction or fix its world_from_splat")


def check_capture_frame(spec: StudySpec, scene: str, bundle: Any) -> Any:
    """Refuse captures whose images the clean scene does not show from their cameras.

    Renders the clean scene at a few capture cameras, downscaled
    (:func:`bench.study.captures.frame_fit`: 4 views, longest side 256 px), in the frame
    the camera file states (no key: splat) and compares with the images:

    * below :data:`CAPTURE_WARN_DB`, the same poses are also read in the other frame;
      when that scores :data:`CAPTURE_FRAME_MARGIN_DB` more and reaches
      :data:`CAPTURE_WARN_DB`, the file is in the wrong frame: refused, naming the fix;
    * a mean below :data:`CAPTURE_REFUSE_DB` is refused (wrong cameras, images or scene);
    * a mean below :data:`CAPTURE_WARN_DB` is a :class:`CaptureWarning` with the number.

    Returns:
        The :class:`bench.study.captures.FrameFit` measured.
    """
    from bench.study.captures import frame_fit

    what = f"captures of scene {scene!r}"
    try:
        fit = frame_fit(bundle, spec.captures[scene], backend=spec.render_backend,
                        other_below=CAPTURE_WARN_DB)
    except BenchError as exc:
        raise BenchError(f"{what}: {exc}") from None
    read = "as the file states" if fit.declared else "the default without a \"frame\" key"
    measured = (f"mean clean Test PSNR {fit.psnr:.1f} dB over {fit.views} views in the "
                f"{fit.frame} frame ({read})")
    if fit.other_psnr is not None and fit.other_psnr >= CAPTURE_WARN_DB \
            and fit.other_psnr >= fit.psnr + CAPTURE_FRAME_MARGIN_DB:
        raise BenchError(f"{what}: the cameras are in the {fit.other} frame, not {fit.frame}: "
                         f"{measured}, {fit.other_psnr:.1f} dB read in the {fit.other} frame; "
                         f"{_frame_fix(fit, fit.other)}")
    if fit.psnr < CAPTURE_REFUSE_DB:
        raise BenchError(f"{what}: {measured}, below {CAPTURE_REFUSE_DB:g} dB: the images do "
                         "not show the clean scene from these cameras; check the camera file's "
                         '"frame" and poses, which image pairs with which camera (by name) and '
                         "the scene's world_from_splat")
    if fit.psnr < CAPTURE_WARN_DB:
        warnings.warn(f"{what}: {measured}, below {CAPTURE_WARN_DB:g} dB; every condition's "
                      "Test scores start this low: check the camera frame and the scene's "
                      "registration if that is unexpected", CaptureWarning, stacklevel=2)
    return fit


def study_cameras(spec: StudySpec) -> list[str]:
    """Camera names of the study's envs: the default rig, or ``real_world.cameras``.

    Both domains use one rig (:mod:`bench.study.world_domain`); study envs observe images.
    """
    from bench.sim.camera_rig import make_rig
    from bench.sim.config import EnvConfig

    rig = EnvConfig().cameras
    if spec.real_domain == "world":
        from bench.study.world_domain import WorldDomain

        rig = WorldDomain.from_dict(spec.real_world).cameras
    return sorted(camera.name for camera in make_rig(EnvConfig(cameras=rig), None))


def _remote(factory: str) -> bool:
    """True when a policy factory names the openpi client (or a registered subclass)."""
    from bench.policies import POLICIES
    from bench.policies.factory import is_entry_point
    from bench.policies.remote import WebsocketPolicy

    if is_entry_point(factory):  # what an entry point builds is known only once it is called
        return False
    obj = POLICIES.get(factory)
    return isinstance(obj, type) and issubclass(obj, WebsocketPolicy)


def check_policy_servers(spec: StudySpec) -> int:
    """Refuse a remote policy whose server's handshake the study's envs cannot meet.

    For each distinct remote policy ref (factory ``openpi``): connect, read the metadata,
    check its capabilities (:func:`bench.policies.remote.check_server`: required cameras
    against :func:`study_cameras`, a 7-D end-effector action layout), close. A server that
    does not answer now is a :class:`PolicyServerWarning`, not a refusal: its rollouts
    retry and end as ``error`` if it stays away. Returns the number of servers checked.
    """
    import json

    from bench.policies.entry import ref_factory, ref_kwargs
    from bench.policies.remote import check_server

    checked: set[str] = set()
    cameras: list[str] | None = None
    for task in spec.tasks:
        for label in spec.policies[task]:
            ref = spec.policy_refs.get(label, label)
            if not _remote(ref_factory(ref)):
                continue
            kwargs = ref_kwargs(ref)
            ident = json.dumps(kwargs, sort_keys=True, default=str)
            if ident in checked:  # one rig for every task: one look per server is enough
                continue
            checked.add(ident)
            cameras = study_cameras(spec) if cameras is None else cameras
            try:
                reached = check_server(kwargs, cameras=cameras, task=task)
            except BenchError as exc:
                raise BenchError(f"policy {label!r} of task {task!r}: {exc}") from None
            if not reached:
                warnings.warn(f"policy {label!r} of task {task!r}: its server does not answer "
                              "now; its rollouts retry and end as error if it stays away",
                              PolicyServerWarning, stacklevel=2)
    return len(checked)


def estimate_bytes(spec: StudySpec, background_bytes: int) -> tuple[int, str]:
    """A generous estimate of what the run writes under ``--out``, and its arithmetic."""
    presets = len([c for c in spec.conditions if c != CLEAN])
    sample = len(spec.sample_scenes) * spec.sample_gaussians * PLY_BYTES_PER_GAUSSIAN
    per_scene = (sample + background_bytes) / max(1, len(spec.scene_names))
    bundles = int(sample + per_scene * presets * len(spec.scene_names))
    rows = count_rollouts(spec)
    total = BASE_BYTES + bundles + rows * ROW_BYTES
    text = (f"{BASE_BYTES >> 20} MiB + {bundles / 2**20:,.0f} MiB of condition bundles + "
            f"{rows:,} rollouts x {ROW_BYTES} B = {total / 2**20:,.0f} MiB")
    return total, text


def check_disk(out: Path, need: int, arithmetic: str) -> None:
    """Refuse when the file system of ``out`` has less free space than ``need`` bytes."""
    probe = out
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        return  # cannot tell (e.g. a special file system): let the writes report it
    if need > free:
        raise BenchError(f"--out {out}: the run needs about {arithmetic}, but {probe} has "
                         f"{free / 2**20:,.0f} MiB free; free space or choose another --out")


def check_study(spec: StudySpec, out: str | os.PathLike, *,
                spec_file: str | os.PathLike | None = None) -> list[Path]:
    """Every refusal of a study run that needs no output directory; returns the inputs read.

    Args:
        spec: The parsed spec.
        out: The output directory (not touched).
        spec_file: The spec file read, an input too (its resolved copy inside ``out``,
            ``out/study.json``, is allowed: resuming from it is normal).

    Raises:
        BenchError: The first problem found, naming the field or file and the fix.
    """
    out = Path(out)
    check_names(spec)
    check_size(spec)
    check_policy_servers(spec)  # connect, read the handshake, close: nothing is written
    given = [("--spec", spec_file)] if spec_file is not None else []
    if spec_file is not None and Path(spec_file).name == "study.json" \
            and os.path.realpath(Path(spec_file).parent) == os.path.realpath(out):
        given = []  # the study's own resolved spec
    given.append(("real_results", spec.real_results))  # None when the real domain is simulated
    given.extend((f"captures.{scene}", path) for scene, path in sorted(spec.captures.items()))
    roots = [root for _what, _scene, root, _clean in _bundle_inputs(spec)]
    check_output_path(out, inputs=[*given, *roots])  # cheap, before any bundle is read
    from bench.study.captures import check_capture_images

    check_capture_images(spec)  # every captured image pairs with its camera (no render)
    inputs, background_bytes = check_bundles(spec)
    check_output_path(out, inputs=inputs)
    check_disk(out, *estimate_bytes(spec, background_bytes))
    check_tables(spec)
    check_obs_policy_frames(spec)  # last: the inputs' own refusals name their problem first
    return inputs
