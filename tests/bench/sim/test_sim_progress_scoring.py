"""bench.sim.progress: online == offline, gates keep credit, strict success hold, archetypes."""

import numpy as np
import pytest

from bench.sim.progress import (
    Frames,
    ProgressScorer,
    ProgressTask,
    Stage,
    StepState,
    SuccessTerm,
    pick_up,
    place_in,
    push_to,
    score_stream,
    smooth,
)

DT = 0.1


def _pose(xyz):  # [T, 3] -> [T, 7] with identity quaternion
    xyz = np.asarray(xyz, dtype=float)
    return np.concatenate([xyz, np.tile([1.0, 0, 0, 0], (len(xyz), 1))], axis=1)


def _place_stream(steps=160, drop_at=None):
    """Gripper reaches the cup, grasps, lifts 8 cm, carries it 0.3 m to the bowl, lowers it."""
    t = np.linspace(0.0, 1.0, steps)
    carry = np.clip((t - 0.3) / 0.35, 0, 1)
    cup = np.zeros((steps, 3))
    cup[:, 0] = 0.3 * carry
    cup[:, 2] = 0.02 + np.where((t > 0.25) & (t < 0.65), 0.08, 0.0) + np.where(t >= 0.65, 0.01, 0.0)
    if drop_at is not None:  # the cup falls back to the table and stays there
        cup[drop_at:, 2] = 0.02
        cup[drop_at:, 0] = cup[drop_at, 0]
    ee = cup.copy()
    ee[:, 0] = np.where(t < 0.2, -0.3 + 1.5 * t, cup[:, 0])
    ee[:, 2] += 0.01
    gripper = np.where((t > 0.2) & (t < 0.7), 0.2, 1.0)
    bowl = np.tile([0.3, 0.0, 0.0], (steps, 1))
    return Frames({"cup": _pose(cup), "bowl": _pose(bowl)}, _pose(ee), gripper)


def _online(spec, stream, success=None):
    scorer = ProgressScorer(spec, dt=DT)
    scores = []
    for i in range(len(stream)):
        state = StepState(
            {k: v[i] for k, v in stream.objects.items()}, stream.ee_pose[i], stream.gripper[i]
        )
        flag = None if success is None else bool(success[i])
        scores.append(scorer.update(state, success=flag))
    return np.array(scores), scorer.trace()


def _external(steps, first_true, *, blip=False):
    """External success flags: true from ``first_true`` on, or only there (``blip``)."""
    flags = np.zeros(steps, dtype=bool)
    if blip:
        flags[first_true] = True
    else:
        flags[first_true:] = True
    return flags


def _push_stream(steps=120):
    t = np.linspace(0.0, 1.0, steps)
    box = np.zeros((steps, 3))
    box[:, 0] = 0.25 * np.clip((t - 0.3) / 0.4, 0, 1)
    box[:, 2] = 0.03
    ee = box.copy()
    ee[:, 0] = np.where(t < 0.3, -0.3 + t / 0.3 * 0.26, box[:, 0] - 0.04)
    return Frames({"box": _pose(box)}, _pose(ee), np.ones(steps))


@pytest.mark.parametrize(
    ("spec", "stream"),
    [
        (place_in("cup", "bowl"), _place_stream()),
        (place_in("cup", "bowl"), _place_stream(drop_at=70)),
        (pick_up("cup", hold_steps=10), _place_stream()),
        (push_to("box", (0.25, 0.0), hold_steps=10), _push_stream()),
    ],
)
@pytest.mark.parametrize("external", [None, "late", "early_blip"])
def test_online_equals_offline_bit_for_bit(spec, stream, external):
    steps = len(stream)
    success = {
        None: None,
        "late": _external(steps, steps - 5),
        "early_blip": _external(steps, steps // 3, blip=True),
    }[external]
    offline = score_stream(spec, stream, dt=DT, success=success)
    scores, trace = _online(spec, stream, success)
    assert np.array_equal(scores, offline.score)
    for name in ("soft", "gates", "progress", "success", "score"):
        assert np.array_equal(getattr(trace, name), getattr(offline, name)), name
    if success is not None:  # the external flag declares success no later than its first true
        assert offline.success_step is not None
        assert offline.success_step <= int(np.flatnonzero(success)[0])


def test_place_in_full_episode_succeeds_after_hold():
    spec = place_in("cup", "bowl")
    assert [s.weight for s in spec.stages] == [0.03, 0.05, 0.07, 0.25, 0.60]  # RobotArena-inf 360
    trace = score_stream(spec, _place_stream(), dt=DT)
    assert trace.succeeded and trace.final_score == 1.0
    # by hand: the cup is lowered into the bowl at the first step with t >= 0.65 (i = 104 of
    # t = i / 159); it is at rest (< 5 mm/s) from the next step, so the strict channel first holds
    # at step 105 and success is declared on its 30th consecutive step
    first_ok = 105
    assert trace.success_step == first_ok + 29
    assert np.all(trace.score >= trace.progress)
    assert trace.first_step_reaching("engage") is not None


def test_lost_grasp_keeps_gated_credit():
    spec = place_in("cup", "bowl")
    trace = score_stream(spec, _place_stream(drop_at=70), dt=DT)
    assert not trace.succeeded
    k_transport = trace.stage_names.index("transport")
    k_engage = trace.stage_names.index("engage")
    # engage's soft term drops after the drop, but the transport gate keeps its running maximum
    assert trace.soft[-1, k_engage] < trace.soft[:, k_engage].max()
    assert trace.gates[-1, k_transport] == pytest.approx(trace.gates[:71, k_transport].max())
    assert 0.0 < trace.final_score < 1.0


def test_strict_success_needs_the_full_hold():
    always = SuccessTerm("ok", lambda ctx: np.ones(len(ctx.current)))
    stage = Stage("only", 1.0, lambda ctx: np.zeros(len(ctx.current)))
    stream = Frames({}, _pose(np.zeros((12, 3))), np.ones(12))
    for hold, expected in ((12, 11), (13, None)):
        spec = ProgressTask("t", (stage,), (always,), hold_steps=hold)
        trace = score_stream(spec, stream, dt=DT)
        assert trace.success_step == expected
        assert trace.final_score == (1.0 if expected is not None else 0.0)


def test_external_success_makes_terminal_one_and_it_stays_one():
    # the strict channel never holds, so without the external signal the score is progress alone
    never = SuccessTerm("never", lambda ctx: np.zeros(len(ctx.current)))
    half = Stage("half", 1.0, lambda ctx: np.full(len(ctx.current), 0.5))
    spec = ProgressTask("t", (half,), (never,), hold_steps=30)
    stream = Frames({}, _pose(np.zeros((8, 3))), np.ones(8))
    plain = score_stream(spec, stream, dt=DT)
    assert not plain.succeeded and plain.final_score == 0.5  # smoothstep(0.5) = 0.5
    # the simulator's predicate is true only at step 3: terminal is 1 from step 3 on (latched)
    flags = _external(8, 3, blip=True)
    trace = score_stream(spec, stream, dt=DT, success=flags)
    assert trace.success.tolist() == [False] * 3 + [True] * 5
    assert trace.score.tolist() == [0.5] * 3 + [1.0] * 5
    assert trace.success_step == 3 and trace.succeeded
    assert np.array_equal(trace.progress, plain.progress)  # progress itself is not touched
    # 0/1 integers are accepted as the same flags
    assert np.array_equal(
        score_stream(spec, stream, dt=DT, success=flags.astype(int)).score, trace.score
    )
    scores, online = _online(spec, stream, flags)
    assert scores.tolist() == trace.score.tolist() and online.succeeded


def test_external_success_does_not_cut_the_strict_hold():
    # strict channel holds from step 0; an all-false external signal changes nothing
    always = SuccessTerm("ok", lambda ctx: np.ones(len(ctx.current)))
    stage = Stage("only", 1.0, lambda ctx: np.zeros(len(ctx.current)))
    spec = ProgressTask("t", (stage,), (always,), hold_steps=5)
    stream = Frames({}, _pose(np.zeros((8, 3))), np.ones(8))
    trace = score_stream(spec, stream, dt=DT, success=np.zeros(8, dtype=bool))
    assert trace.success_step == 4 and trace.score.tolist() == [0.0] * 4 + [1.0] * 4


def test_gate_formula_by_hand():
    # stage b (weight 0.5) requires a; a's soft term is 0.5 at step 0 then 0
    a = Stage("a", 0.5, lambda ctx: np.where(ctx.current.gripper > 0.5, 0.5, 0.0))
    b = Stage("b", 0.5, lambda ctx: np.ones(len(ctx.current)), ("a",))
    never = SuccessTerm("never", lambda ctx: np.zeros(len(ctx.current)))
    spec = ProgressTask("t", (a, b), (never,))
    trace = score_stream(
        spec, Frames({}, _pose(np.zeros((3, 3))), np.array([1.0, 0.0, 0.0])), dt=DT
    )
    s = 0.5 * 0.5 * (3 - 2 * 0.5)  # smoothstep(0.5) = 0.5
    gate = 0.25 + 0.75 * s
    assert trace.gates[:, 1].tolist() == pytest.approx([gate, gate, gate])
    assert trace.progress.tolist() == pytest.approx([0.5 * s + 0.5 * gate, 0.5 * gate, 0.5 * gate])


def test_archetype_registry_weights_match_specs():
    from bench.sim.progress import ARCHETYPES

    assert ARCHETYPES.names() == ["place_in", "pick_up", "push_to"]
    args = {"place_in": ("cup", "bowl"), "pick_up": ("cup",), "push_to": ("box", (0.0, 0.0))}
    for entry in ARCHETYPES:
        spec = entry.obj(*args[entry.name])
        assert tuple(stage.weight for stage in spec.stages) == entry.meta["weights"]
    with pytest.raises(ValueError, match="did you mean 'place_in'"):
        ARCHETYPES.get("place-in")


def test_push_to_reaches_target():
    trace = score_stream(push_to("box", (0.25, 0.0), hold_steps=10), _push_stream(), dt=DT)
    assert trace.succeeded and trace.final_score == 1.0


def test_smooth_endpoints_and_monotone():
    x = np.linspace(-1, 2, 301)
    y = smooth(x)
    assert y[0] == 0.0 and y[-1] == 1.0 and np.all(np.diff(y) >= 0)


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (
            lambda: ProgressTask("t", (Stage("a", 0.5, None),), (SuccessTerm("c", None),)),
            "sum to 1",
        ),
        (
            lambda: ProgressTask(
                "t", (Stage("a", 1.0, None, ("z",)),), (SuccessTerm("c", None),)
            ),
            "earlier",
        ),
        (
            lambda: ProgressTask(
                "t", (Stage("a", 1.0, None),), (SuccessTerm("c", None),), hold_steps=0
            ),
            ">= 1",
        ),
        (lambda: Frames({}, np.zeros((3, 6)), np.zeros(3)), "ee_pose"),
        (lambda: Frames({"o": np.zeros((2, 7))}, np.zeros((3, 7)), np.zeros(3)), "object 'o'"),
        (lambda: Frames({}, np.full((1, 7), np.nan), np.zeros(1)), "NaN"),
        (lambda: place_in("cup", "bowl", lift_dz=-1), "positive"),
        (lambda: push_to("box", (1.0,)), "target_xy"),
        (lambda: ProgressScorer(place_in("cup", "bowl"), dt=0), "dt"),
        (lambda: score_stream(place_in("cup", "mug"), _place_stream(), dt=DT), "unknown object"),
        (
            lambda: score_stream(
                place_in("cup", "bowl"), _place_stream(), dt=DT, success=np.zeros(3, bool)
            ),
            r"\[T\] = \[160\]",
        ),
        (
            lambda: score_stream(
                place_in("cup", "bowl"), _place_stream(), dt=DT, success=np.full(160, 0.5)
            ),
            "0/1",
        ),
        (
            lambda: ProgressScorer(place_in("cup", "bowl"), dt=DT).update(
                StepState({}, np.zeros(7), 1.0), success="yes"
            ),
            "must be a bool",
        ),
    ],
)
def test_bad_input(call, fragment):
    with pytest.raises(ValueError, match=fragment):
        call()
