"""Stage-wise progress scoring over privileged simulator state (RobotArena-inf 360 form).

A :class:`ProgressTask` decomposes a task into weighted stages with prerequisites and
a strict success channel. At every step ``t``:

* ``soft_k(t)`` in [0, 1] is each stage's soft term, passed through
  ``smooth(x) = 3x^2 - 2x^3`` (smoothstep of the clipped value);
* ``gate_k(t) = 0.25 + 0.75 * min_{j in prereq(k)} max_{s <= t} smooth(soft_j(s))``
  (1 for a stage without prerequisites): the *running* maximum means a lost
  grasp does not erase credit for having grasped;
* ``progress(t) = sum_k w_k * smooth(soft_k(t)) * gate_k(t)`` (weights sum to 1);
* the strict channel holds when every success condition is ``>= 0.9``; success
  is declared once it has held for ``hold_steps`` consecutive steps and stays
  declared (a trial succeeds as soon as its criterion is met);
* ``score(t) = max(progress(t), terminal(t))`` with ``terminal(t) = 1`` after success.

The terminal channel may also take an external success signal ``[T]`` (bool): a
simulator's own success predicate, which is authoritative when given. Then
``terminal(t) = 1`` from the first step where either the strict channel has held
``hold_steps`` steps or the external signal is true, and stays 1 (a running
maximum, like the strict channel), so an episode the simulator declares
successful scores 1 at the step it ends, even when it ends before the strict
channel could complete its hold.

Success and progress are reported under separate names and never mixed.

State (metres, seconds): object poses ``[T, 7]`` per object
(x, y, z, qw, qx, qy, qz), end-effector pose ``[T, 7]``, gripper opening ``[T]``
(0 = closed, 1 = fully open), fixed step ``dt``. Terms only read the current
step, the previous step and the first step, so the online scorer
(:class:`ProgressScorer`, one ``update`` per step) and the offline one
(:func:`score_stream`, vectorised over a recorded stream) give bit-identical results.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from bench.registry import Registry

SUCCESS_LEVEL = 0.9
GATE_FLOOR = 0.25


@dataclass(frozen=True)
class Frames:
    """A block of consecutive states (``T`` rows; ``T = 1`` for one step).

    Attributes:
        objects: Object name -> poses ``[T, 7]`` (x, y, z, qw, qx, qy, qz), metres.
        ee_pose: End-effector poses ``[T, 7]``.
        gripper: Gripper opening ``[T]`` in [0, 1] (0 closed, 1 open).
    """

    objects: Mapping[str, np.ndarray]
    ee_pose: np.ndarray
    gripper: np.ndarray

    def __post_init__(self) -> None:
        ee = np.asarray(self.ee_pose, dtype=np.float64)
        if ee.ndim != 2 or ee.shape[1] != 7:
            raise ValueError(f"ee_pose must be [T, 7] (x, y, z, qw, qx, qy, qz), got {ee.shape}")
        steps = ee.shape[0]
        if steps < 1:
            raise ValueError("a state stream needs at least one step")
        grip = np.asarray(self.gripper, dtype=np.float64)
        if grip.shape != (steps,):
            raise ValueError(f"gripper must be [T] = [{steps}], got {grip.shape}")
        objects: dict[str, np.ndarray] = {}
        for name, poses in self.objects.items():
            arr = np.asarray(poses, dtype=np.float64)
            if arr.shape != (steps, 7):
                raise ValueError(
                    f"object {name!r} poses must be [T, 7] = [{steps}, 7], got {arr.shape}"
                )
            objects[name] = arr
        for name, arr in (("ee_pose", ee), ("gripper", grip), *objects.items()):
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"{name} contains NaN/inf; fix the recorded state before scoring")
        object.__setattr__(self, "objects", objects)
        object.__setattr__(self, "ee_pose", ee)
        object.__setattr__(self, "gripper", grip)

    def __len__(self) -> int:
        return int(self.ee_pose.shape[0])

    def rows(self, index: slice | np.ndarray) -> Frames:
        """The rows selected by ``index`` (a slice or an integer index array)."""
        return Frames(
            {k: v[index] for k, v in self.objects.items()}, self.ee_pose[index], self.gripper[index]
        )

    def position(self, name: str) -> np.ndarray:  # [T, 3]
        """Position of object ``name`` (``"ee"`` for the end effector)."""
        if name == "ee":
            return self.ee_pose[:, :3]
        if name not in self.objects:
            raise ValueError(f"unknown object {name!r}; the state has {sorted(self.objects)}")
        return self.objects[name][:, :3]


@dataclass(frozen=True)
class StepState:
    """One step of state, as the online scorer receives it.

    Attributes:
        objects: Object name -> pose ``[7]``.
        ee_pose: End-effector pose ``[7]``.
        gripper: Gripper opening in [0, 1].
    """

    objects: Mapping[str, np.ndarray]
    ee_pose: np.ndarray
    gripper: float

    def as_frames(self) -> Frames:
        """This step as a one-row :class:`Frames`."""
        return Frames(
            {k: np.asarray(v, dtype=np.float64)[None, :] for k, v in self.objects.items()},
            np.asarray(self.ee_pose, dtype=np.float64)[None, :],
            np.asarray([self.gripper], dtype=np.float64),
        )


@dataclass(frozen=True)
class TermContext:
    """What a soft term or a success condition may read (all blocks have ``T`` rows).

    Attributes:
        current: The states being scored.
        previous: The state one step earlier (the first step repeats itself).
        first: The first state of the episode, one row (broadcasts).
        dt: Seconds per step.
    """

    current: Frames
    previous: Frames
    first: Frames
    dt: float


Term = Callable[[TermContext], np.ndarray]  # TermContext -> [T] values in [0, 1]


@dataclass(frozen=True)
class Stage:
    """A weighted milestone with prerequisites.

    Attributes:
        name: Stage name (unique within the task).
        weight: Share of the progress score (weights of a task sum to 1).
        soft: Soft term, ``TermContext -> [T]`` in [0, 1].
        prerequisites: Names of earlier stages that gate this one.
    """

    name: str
    weight: float
    soft: Term
    prerequisites: tuple[str, ...] = ()


@dataclass(frozen=True)
class SuccessTerm:
    """A strict success condition, satisfied when its value is ``>= 0.9``.

    Attributes:
        name: SuccessTerm name.
        value: ``TermContext -> [T]`` in [0, 1].
    """

    name: str
    value: Term


@dataclass(frozen=True)
class ProgressTask:
    """A task as weighted stages plus a strict success channel.

    Attributes:
        name: Task name (e.g. ``"place_in(cup, bowl)"``).
        stages: Stages in an order where prerequisites come first.
        success: Strict success conditions (all must hold).
        hold_steps: Consecutive steps the strict channel must hold (30 in RobotArena-inf 360).
        objects: Role -> object name, for reports.
    """

    name: str
    stages: tuple[Stage, ...]
    success: tuple[SuccessTerm, ...]
    hold_steps: int = 30
    objects: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.stages:
            raise ValueError("a ProgressTask needs at least one stage")
        if not self.success:
            raise ValueError("a ProgressTask needs at least one success condition")
        if int(self.hold_steps) != self.hold_steps or self.hold_steps < 1:
            raise ValueError(f"hold_steps must be a whole number >= 1, got {self.hold_steps}")
        seen: set[str] = set()
        for stage in self.stages:
            if stage.name in seen:
                raise ValueError(f"stage name {stage.name!r} is used twice; names must be unique")
            if stage.weight < 0:
                raise ValueError(f"stage {stage.name!r} has negative weight {stage.weight}")
            for prerequisite in stage.prerequisites:
                if prerequisite not in seen:
                    raise ValueError(
                        f"stage {stage.name!r} requires {prerequisite!r}, which is not an earlier "
                        "stage; list prerequisites before the stages they gate"
                    )
            seen.add(stage.name)
        total = sum(stage.weight for stage in self.stages)
        if abs(total - 1.0) > 1e-9:
            raise ValueError(f"stage weights must sum to 1, got {total:.6g}; rescale the weights")

    @property
    def stage_names(self) -> tuple[str, ...]:
        """Names of the stages in order."""
        return tuple(stage.name for stage in self.stages)


def smooth(x: np.ndarray) -> np.ndarray:  # [T] -> [T]
    """Smoothstep ``3x^2 - 2x^3`` of ``x`` clipped to [0, 1] (monotone, flat at both ends)."""
    c = np.clip(np.asarray(x, dtype=np.float64), 0.0, 1.0)
    return c * c * (3.0 - 2.0 * c)


def _prereq_indices(spec: ProgressTask) -> list[list[int]]:
    index = {name: i for i, name in enumerate(spec.stage_names)}
    return [[index[p] for p in stage.prerequisites] for stage in spec.stages]


def _evaluate_terms(spec: ProgressTask, ctx: TermContext) -> tuple[np.ndarray, np.ndarray]:
    """Smoothed soft terms ``[T, K]`` and strict-channel flags ``[T]`` for a block of rows."""
    steps = len(ctx.current)
    soft = np.empty((steps, len(spec.stages)), dtype=np.float64)
    for k, stage in enumerate(spec.stages):
        soft[:, k] = smooth(_term_values(stage.soft, ctx, steps, stage.name))
    ok = np.ones(steps, dtype=bool)
    for condition in spec.success:
        ok &= _term_values(condition.value, ctx, steps, condition.name) >= SUCCESS_LEVEL
    return soft, ok


def _term_values(term: Term, ctx: TermContext, steps: int, name: str) -> np.ndarray:  # [T]
    values = np.broadcast_to(np.asarray(term(ctx), dtype=np.float64), (steps,))
    if not np.all(np.isfinite(values)):
        raise ValueError(f"term {name!r} returned NaN/inf; check the state it reads")
    return values


def _combine(
    spec: ProgressTask, soft: np.ndarray, levels: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Gates ``[T, K]`` and progress ``[T]`` from smoothed soft terms and their running maxima."""
    gates = np.ones_like(soft)
    progress = np.zeros(soft.shape[0], dtype=np.float64)
    for k, (stage, prereqs) in enumerate(zip(spec.stages, _prereq_indices(spec), strict=True)):
        if prereqs:
            reached = levels[:, prereqs[0]]
            for j in prereqs[1:]:
                reached = np.minimum(reached, levels[:, j])
            gates[:, k] = GATE_FLOOR + (1.0 - GATE_FLOOR) * reached
        progress = progress + stage.weight * soft[:, k] * gates[:, k]
    return gates, progress


@dataclass(frozen=True)
class ProgressTrace:
    """Scores of a whole episode.

    Attributes:
        stage_names: Stage names, the columns of ``soft`` and ``gates``.
        soft: Smoothed soft terms ``[T, K]``.
        gates: Gates ``[T, K]``.
        progress: Weighted, gated progress ``[T]`` (without the terminal term).
        success: Success declared by step t ``[T]`` (bool, latched): the strict channel
            held ``hold_steps`` steps, or the external success signal was true.
        score: ``max(progress, terminal)`` ``[T]``.
    """

    stage_names: tuple[str, ...]
    soft: np.ndarray
    gates: np.ndarray
    progress: np.ndarray
    success: np.ndarray
    score: np.ndarray

    @property
    def succeeded(self) -> bool:
        """Whether success was declared in the episode (strict channel or external signal)."""
        return bool(self.success[-1])

    @property
    def success_step(self) -> int | None:
        """First step at which success was declared (None if never)."""
        hits = np.flatnonzero(self.success)
        return int(hits[0]) if hits.size else None

    @property
    def final_score(self) -> float:
        """Score at the last step."""
        return float(self.score[-1])

    def first_step_reaching(self, stage: str, level: float = SUCCESS_LEVEL) -> int | None:
        """First step where a stage's smoothed soft term reaches ``level`` (time to first grasp)."""
        if stage not in self.stage_names:
            raise ValueError(f"unknown stage {stage!r}; stages are {list(self.stage_names)}")
        hits = np.flatnonzero(self.soft[:, self.stage_names.index(stage)] >= level)
        return int(hits[0]) if hits.size else None


def _check_dt(dt: float) -> float:
    value = float(dt)
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"dt must be a positive number of seconds per step, got {dt!r}")
    return value


def _check_success_signal(success: object, steps: int) -> np.ndarray:  # [T] bool
    signal = np.asarray(success)
    if signal.shape != (steps,):
        raise ValueError(
            f"success must be a [T] = [{steps}] bool array (one flag per step), got {signal.shape}"
        )
    if signal.dtype != np.bool_:
        if not (np.issubdtype(signal.dtype, np.number) and np.all((signal == 0) | (signal == 1))):
            raise ValueError(
                "success must hold booleans (or 0/1); got values outside {0, 1} - pass the "
                "simulator's success predicate per step"
            )
        signal = signal.astype(bool)
    return signal


def score_stream(
    spec: ProgressTask, stream: Frames, *, dt: float, success: np.ndarray | None = None
) -> ProgressTrace:
    """Score a recorded stream in one vectorised pass (offline).

    Args:
        spec: The task.
        stream: The recorded states, ``T`` rows.
        dt: Seconds per step.
        success: Optional external success signal ``[T]`` (bool), e.g. the simulator's own
            success predicate per step; once true, the terminal channel is 1 from then on.

    Returns:
        A :class:`ProgressTrace`; identical to stepping :class:`ProgressScorer` with the
        same ``success`` flags.
    """
    dt = _check_dt(dt)
    steps = len(stream)
    external = (
        np.zeros(steps, dtype=bool) if success is None else _check_success_signal(success, steps)
    )
    previous_index = np.concatenate([[0], np.arange(steps - 1)])
    ctx = TermContext(stream, stream.rows(previous_index), stream.rows(slice(0, 1)), dt)
    soft, ok = _evaluate_terms(spec, ctx)
    levels = np.maximum.accumulate(soft, axis=0)
    gates, progress = _combine(spec, soft, levels)
    run = np.zeros(steps, dtype=np.int64)
    count = 0
    for t in range(steps):  # consecutive-hold counter
        count = count + 1 if ok[t] else 0
        run[t] = count
    success = np.maximum.accumulate((run >= spec.hold_steps) | external)
    score = np.maximum(progress, success.astype(np.float64))
    return ProgressTrace(spec.stage_names, soft, gates, progress, success, score)


class ProgressScorer:
    """Online scorer: call :meth:`update` once per step; same numbers as :func:`score_stream`.

    Args:
        spec: The task.
        dt: Seconds per step.
    """

    def __init__(self, spec: ProgressTask, *, dt: float) -> None:
        self.spec = spec
        self.dt = _check_dt(dt)
        self.reset()

    def reset(self) -> None:
        """Forget the episode (call before a new one)."""
        self._first: Frames | None = None
        self._previous: Frames | None = None
        self._levels = np.zeros((1, len(self.spec.stages)), dtype=np.float64)
        self._run = 0
        self._success = False
        self._rows: list[tuple[np.ndarray, np.ndarray, float, bool, float]] = []

    def update(self, state: StepState | Frames, *, success: bool | None = None) -> float:
        """Score one more step and return ``score(t)``.

        Args:
            state: The step's state (one row).
            success: Optional external success flag for this step (the simulator's own
                success predicate); once true, the terminal channel is 1 from then on.
        """
        if success is not None and not isinstance(success, bool | np.bool_):
            raise ValueError(
                f"success must be a bool (the simulator's success flag), got {success!r}"
            )
        current = state.as_frames() if isinstance(state, StepState) else state
        if len(current) != 1:
            raise ValueError(f"update takes one step, got {len(current)} rows; use score_stream")
        if self._first is None:
            self._first = current
        previous = self._previous if self._previous is not None else current
        soft, ok = _evaluate_terms(self.spec, TermContext(current, previous, self._first, self.dt))
        self._levels = np.maximum(self._levels, soft)
        gates, progress = _combine(self.spec, soft, self._levels)
        self._run = self._run + 1 if bool(ok[0]) else 0
        self._success = self._success or self._run >= self.spec.hold_steps or bool(success)
        score = float(np.maximum(progress[0], float(self._success)))
        self._rows.append((soft[0], gates[0], float(progress[0]), self._success, score))
        self._previous = current
        return score

    @property
    def succeeded(self) -> bool:
        """Whether success has been declared so far (strict channel or external signal)."""
        return self._success

    def trace(self) -> ProgressTrace:
        """Everything scored so far as a :class:`ProgressTrace`."""
        if not self._rows:
            raise ValueError("no steps scored yet; call update(state) first")
        soft, gates, progress, success, score = zip(*self._rows, strict=True)
        return ProgressTrace(
            self.spec.stage_names,
            np.stack(soft),
            np.stack(gates),
            np.array(progress, dtype=np.float64),
            np.array(success, dtype=bool),
            np.array(score, dtype=np.float64),
        )


# --- geometry helpers for archetype terms (vectorised over rows) ---------------------------


def _norm(v: np.ndarray) -> np.ndarray:  # [T, D] -> [T]
    # explicit sum of squares: identical per row whatever the block size
    total = v[:, 0] * v[:, 0]
    for d in range(1, v.shape[1]):
        total = total + v[:, d] * v[:, d]
    return np.sqrt(total)


def _ramp_down(x: np.ndarray, near: float, far: float) -> np.ndarray:  # [T] -> [T]
    """1 at ``x <= near``, 0 at ``x >= far``, linear between."""
    return np.clip((far - x) / (far - near), 0.0, 1.0)


def _ramp_up(x: np.ndarray, low: float, high: float) -> np.ndarray:  # [T] -> [T]
    """0 at ``x <= low``, 1 at ``x >= high``, linear between."""
    return np.clip((x - low) / (high - low), 0.0, 1.0)


def _distance(frames: Frames, a: str, b: str) -> np.ndarray:  # [T]
    return _norm(frames.position(a) - frames.position(b))


def _horizontal(ctx_frames: Frames, a: str, b_xy: np.ndarray) -> np.ndarray:  # [T]
    return _norm(ctx_frames.position(a)[:, :2] - b_xy)


def _speed(ctx: TermContext, name: str) -> np.ndarray:  # [T] metres / second
    return _norm(ctx.current.position(name) - ctx.previous.position(name)) / ctx.dt


def _closure(frames: Frames, closed_below: float) -> np.ndarray:  # [T]
    return _ramp_down(frames.gripper, closed_below, 1.0)


def _check_positive(**values: float) -> None:
    for name, value in values.items():
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive length/speed, got {value!r}")


def _approach_and_engage(
    actor: str, *, near: float, far: float, closed_below: float, weights: tuple[float, float]
) -> list[Stage]:
    def approach(ctx: TermContext) -> np.ndarray:
        return _ramp_down(_distance(ctx.current, "ee", actor), near, far)

    def engage(ctx: TermContext) -> np.ndarray:
        close = _ramp_down(_distance(ctx.current, "ee", actor), near, 2.0 * near)
        return close * _closure(ctx.current, closed_below)

    return [
        Stage("approach", weights[0], approach),
        Stage("engage", weights[1], engage, ("approach",)),
    ]


def place_in(
    actor: str,
    receptacle: str,
    *,
    lift_dz: float = 0.06,
    mouth_radius: float = 0.06,
    rim_height: float = 0.05,
    actor_half_height: float = 0.02,
    below_rim: float = 0.02,
    rest_speed: float = 0.005,
    near: float = 0.03,
    far: float = 0.30,
    closed_below: float = 0.5,
    hold_steps: int = 30,
) -> ProgressTask:
    """Put ``actor`` into ``receptacle`` (stage weights as in RobotArena-inf 360).

    Stages: approach 0.03; engage 0.05 (after approach); lift 0.07 (after engage,
    full at ``lift_dz`` metres above the start height); transport 0.25 (after
    engage: horizontal distance to the receptacle mouth, relative to the start);
    place-in 0.60 (after transport: over the mouth and underside below the rim).
    Strict success, held ``hold_steps`` steps: centre within ``mouth_radius`` of the
    receptacle axis, underside at least ``below_rim`` below the rim and above the
    receptacle base, actor at rest (``< rest_speed`` m/s).

    Args:
        actor: Object to move.
        receptacle: Object to put it into (its pose origin is the base centre).
        lift_dz: Lift height for full lift credit (m).
        mouth_radius: Radius of the receptacle mouth (m).
        rim_height: Rim height above the receptacle origin (m).
        actor_half_height: Actor centre-to-underside distance (m).
        below_rim: Required depth of the underside below the rim (m).
        rest_speed: Speed below which the actor is at rest (m/s).
        near: End-effector-to-actor distance of full approach credit (m).
        far: Distance of zero approach credit (m).
        closed_below: Gripper opening at or below which the gripper counts as closed.
        hold_steps: Steps the strict channel must hold.

    Returns:
        The :class:`ProgressTask`.
    """
    _check_positive(
        lift_dz=lift_dz,
        mouth_radius=mouth_radius,
        rim_height=rim_height,
        actor_half_height=actor_half_height,
        below_rim=below_rim,
        rest_speed=rest_speed,
        near=near,
        far=far,
    )
    if far <= near:
        raise ValueError(f"far ({far}) must exceed near ({near})")

    def mouth_xy(frames: Frames) -> np.ndarray:  # [T, 2]
        return frames.position(receptacle)[:, :2]

    def lift(ctx: TermContext) -> np.ndarray:
        dz = ctx.current.position(actor)[:, 2] - ctx.first.position(actor)[:, 2]
        return _ramp_up(dz, 0.0, lift_dz)

    def transport(ctx: TermContext) -> np.ndarray:
        start = _horizontal(ctx.first, actor, mouth_xy(ctx.first))
        span = np.maximum(start, mouth_radius + 1e-6)
        return _ramp_down(
            _horizontal(ctx.current, actor, mouth_xy(ctx.current)), mouth_radius, span
        )

    def depth_below_rim(frames: Frames) -> np.ndarray:  # [T] metres, > 0 below the rim
        rim = frames.position(receptacle)[:, 2] + rim_height
        return rim - (frames.position(actor)[:, 2] - actor_half_height)

    def place(ctx: TermContext) -> np.ndarray:
        over = _ramp_down(
            _horizontal(ctx.current, actor, mouth_xy(ctx.current)), mouth_radius, 2 * mouth_radius
        )
        return over * _ramp_up(depth_below_rim(ctx.current), 0.0, below_rim)

    def centred(ctx: TermContext) -> np.ndarray:
        return (_horizontal(ctx.current, actor, mouth_xy(ctx.current)) <= mouth_radius).astype(
            float
        )

    def inside(ctx: TermContext) -> np.ndarray:
        depth = depth_below_rim(ctx.current)
        return ((depth >= below_rim) & (depth <= rim_height + 1e-9)).astype(float)

    def at_rest(ctx: TermContext) -> np.ndarray:
        return (_speed(ctx, actor) < rest_speed).astype(float)

    stages = _approach_and_engage(
        actor, near=near, far=far, closed_below=closed_below, weights=(0.03, 0.05)
    )
    stages += [
        Stage("lift", 0.07, lift, ("engage",)),
        Stage("transport", 0.25, transport, ("engage",)),
        Stage("place_in", 0.60, place, ("transport",)),
    ]
    return ProgressTask(
        name=f"place_in({actor}, {receptacle})",
        stages=tuple(stages),
        success=(
            SuccessTerm("centre_over_mouth", centred),
            SuccessTerm("underside_below_rim_above_base", inside),
            SuccessTerm("at_rest", at_rest),
        ),
        hold_steps=hold_steps,
        objects={"actor": actor, "receptacle": receptacle},
    )


def pick_up(
    actor: str,
    *,
    lift_dz: float = 0.06,
    near: float = 0.03,
    far: float = 0.30,
    closed_below: float = 0.5,
    hold_steps: int = 30,
) -> ProgressTask:
    """Grasp ``actor`` and lift it by ``lift_dz`` metres.

    Stages: approach 0.10; engage 0.20 (after approach); lift 0.70 (after engage).
    Strict success, held ``hold_steps`` steps: actor at least ``lift_dz`` above its
    start height, end effector within ``2 * near`` of it, gripper closed.
    """
    _check_positive(lift_dz=lift_dz, near=near, far=far)
    if far <= near:
        raise ValueError(f"far ({far}) must exceed near ({near})")

    def lift(ctx: TermContext) -> np.ndarray:
        dz = ctx.current.position(actor)[:, 2] - ctx.first.position(actor)[:, 2]
        return _ramp_up(dz, 0.0, lift_dz)

    def lifted(ctx: TermContext) -> np.ndarray:
        dz = ctx.current.position(actor)[:, 2] - ctx.first.position(actor)[:, 2]
        return (dz >= lift_dz).astype(float)

    def held(ctx: TermContext) -> np.ndarray:
        close = _distance(ctx.current, "ee", actor) <= 2.0 * near
        return (close & (ctx.current.gripper <= closed_below)).astype(float)

    stages = _approach_and_engage(
        actor, near=near, far=far, closed_below=closed_below, weights=(0.10, 0.20)
    )
    stages.append(Stage("lift", 0.70, lift, ("engage",)))
    return ProgressTask(
        name=f"pick_up({actor})",
        stages=tuple(stages),
        success=(SuccessTerm("lifted", lifted), SuccessTerm("held", held)),
        hold_steps=hold_steps,
        objects={"actor": actor},
    )


def push_to(
    actor: str,
    target_xy: Sequence[float],
    *,
    tolerance: float = 0.03,
    rest_speed: float = 0.005,
    near: float = 0.05,
    far: float = 0.30,
    hold_steps: int = 30,
) -> ProgressTask:
    """Push ``actor`` on the table until its centre is within ``tolerance`` of ``target_xy``.

    Stages: approach 0.10; contact 0.20 (after approach: end effector within
    ``near`` of the actor); push 0.70 (after contact: remaining horizontal
    distance to the target relative to the start). Strict success, held
    ``hold_steps`` steps: within ``tolerance`` (m) and at rest (``< rest_speed`` m/s).
    """
    _check_positive(tolerance=tolerance, rest_speed=rest_speed, near=near, far=far)
    target = np.asarray(target_xy, dtype=np.float64)
    if target.shape != (2,) or not np.all(np.isfinite(target)):
        raise ValueError(
            f"target_xy must be two finite numbers (x, y) in metres, got {target_xy!r}"
        )
    if far <= near:
        raise ValueError(f"far ({far}) must exceed near ({near})")

    def approach(ctx: TermContext) -> np.ndarray:
        return _ramp_down(_distance(ctx.current, "ee", actor), near, far)

    def contact(ctx: TermContext) -> np.ndarray:
        return _ramp_down(_distance(ctx.current, "ee", actor), near, 1.5 * near)

    def push(ctx: TermContext) -> np.ndarray:
        span = np.maximum(_horizontal(ctx.first, actor, target), tolerance + 1e-6)
        return _ramp_down(_horizontal(ctx.current, actor, target), tolerance, span)

    def on_target(ctx: TermContext) -> np.ndarray:
        return (_horizontal(ctx.current, actor, target) <= tolerance).astype(float)

    def at_rest(ctx: TermContext) -> np.ndarray:
        return (_speed(ctx, actor) < rest_speed).astype(float)

    return ProgressTask(
        name=f"push_to({actor}, [{target[0]:g}, {target[1]:g}])",
        stages=(
            Stage("approach", 0.10, approach),
            Stage("contact", 0.20, contact, ("approach",)),
            Stage("push", 0.70, push, ("contact",)),
        ),
        success=(SuccessTerm("on_target", on_target), SuccessTerm("at_rest", at_rest)),
        hold_steps=hold_steps,
        objects={"actor": actor},
    )


#: Task archetypes by name, with their stage weights as metadata ("did you mean" on typos).
ARCHETYPES: Registry[Callable[..., ProgressTask]] = Registry("progress archetype")
ARCHETYPES.register("place_in", place_in, weights=(0.03, 0.05, 0.07, 0.25, 0.60), objects=2)
ARCHETYPES.register("pick_up", pick_up, weights=(0.10, 0.20, 0.70), objects=1)
ARCHETYPES.register("push_to", push_to, weights=(0.10, 0.20, 0.70), objects=1)


__all__ = [
    "ARCHETYPES",
    "SuccessTerm",
    "Frames",
    "ProgressScorer",
    "ProgressTrace",
    "Stage",
    "StepState",
    "ProgressTask",
    "TermContext",
    "pick_up",
    "place_in",
    "push_to",
    "score_stream",
    "smooth",
]

#: A recorded state stream is a block of frames: object poses [T, 7], ee pose [T, 7], gripper [T].
StateStream = Frames
__all__.append("StateStream")
