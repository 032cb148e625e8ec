"""Success predicates on hand-built states (geometry from the task specs in bench.sim.tasks)."""

import numpy as np
import pytest

from bench.sim.state import ObjectState, TaskState
from bench.sim.tasks import get_task

UP = np.array([1.0, 0.0, 0.0, 0.0])


def _yaw(deg):
    a = np.deg2rad(deg) / 2
    return np.array([np.cos(a), 0.0, 0.0, np.sin(a)])


def _tilt_x(deg):
    a = np.deg2rad(deg) / 2
    return np.array([np.cos(a), np.sin(a), 0.0, 0.0])


def _state(objects, contacts=(), attached=None):
    return TaskState(
        objects={
            k: ObjectState(
                pos=np.asarray(p, float), quat=np.asarray(q, float), linvel=np.asarray(v, float)
            )
            for k, (p, q, v) in objects.items()
        },
        contacts=frozenset(tuple(sorted(c)) for c in contacts),
        attached=attached,
        tcp_pos=np.zeros(3),
        tcp_quat=UP,
        opening=0.1,
    )


CUP = get_task("cup")
# plate origin at its centre: top at 0.006; cup (height 0.09) resting on it has its centre at 0.051
PLATE = ((0.0, 0.14, 0.006), UP, (0, 0, 0))
CUP_ON_PLATE = ((0.01, 0.15, 0.051), UP, (0, 0, 0))
ON_PLATE_CONTACTS = [("cup", "plate"), ("plate", "table")]


def test_cup_on_plate_positive():
    assert CUP.success(_state({"cup": CUP_ON_PLATE, "plate": PLATE}, ON_PLATE_CONTACTS))


@pytest.mark.parametrize(
    "change",
    ["held", "pinched", "moving", "tilted", "off_centre", "on_table", "no_contact", "plate_lifted"],
)
def test_cup_on_plate_negatives(change):
    cup, contacts, attached = list(CUP_ON_PLATE), list(ON_PLATE_CONTACTS), None
    if change == "held":
        attached = "cup"
    elif change == "pinched":
        contacts += [("cup", "left_pad"), ("cup", "right_pad")]
    elif change == "moving":
        cup[2] = (0.0, 0.0, -0.2)
    elif change == "tilted":
        cup[1] = _tilt_x(30.0)
    elif change == "off_centre":  # 0.08 m from the plate axis > 0.09 - 0.0175
        cup[0] = (0.08, 0.14, 0.051)
    elif change == "on_table":
        contacts += [("cup", "table")]
    elif change == "no_contact":
        contacts = [("plate", "table")]
    elif change == "plate_lifted":
        contacts = [("cup", "plate")]
    state = _state({"cup": tuple(cup), "plate": PLATE}, contacts, attached)
    assert not CUP.success(state)


TAPE = get_task("tape")
BOX = ((0.0, 0.15, 0.004), UP, (0, 0, 0))  # floor plate centre, floor top at 0.008, rim at 0.054
TAPE_IN = ((0.05, 0.18, 0.023), UP, (0, 0, 0))


def test_tape_in_box_positive_and_negatives():
    ok = [("tape", "box"), ("box", "table")]
    assert TAPE.success(_state({"tape": TAPE_IN, "box": BOX}, ok))
    # outside the inner footprint (inner half-size 0.095 x 0.075)
    assert not TAPE.success(_state({"tape": ((0.10, 0.15, 0.023), UP, (0, 0, 0)), "box": BOX}, ok))
    # top above the rim: resting on the rim edge, centre at 0.06 -> top at 0.075 > 0.054
    assert not TAPE.success(_state({"tape": ((0.05, 0.18, 0.06), UP, (0, 0, 0)), "box": BOX}, ok))
    # standing on its edge (tilted 90 deg): top = centre + radius = 0.048 + 0.04 > 0.054
    edge = ((0.05, 0.18, 0.048), _tilt_x(90.0), (0, 0, 0))
    assert not TAPE.success(_state({"tape": edge, "box": BOX}, ok))
    assert not TAPE.success(_state({"tape": TAPE_IN, "box": BOX}, ok, attached="tape"))
    # inside a rotated box: the same world point is outside when the box turns 90 degrees
    turned = ((0.0, 0.15, 0.004), _yaw(90.0), (0, 0, 0))
    far_x = ((0.085, 0.15, 0.023), UP, (0, 0, 0))
    assert TAPE.success(_state({"tape": far_x, "box": BOX}, ok))
    assert not TAPE.success(_state({"tape": far_x, "box": turned}, ok))


PEN = get_task("pen")
PEN_BOX = ((0.0, 0.15, 0.004), UP, (0, 0, 0))  # inner 0.20 x 0.08, rim at 0.0395


def test_pen_in_box_positive_and_negatives():
    ok = [("pen", "pen_box"), ("pen_box", "table")]
    along = ((0.0, 0.15, 0.0145), UP, (0, 0, 0))
    assert PEN.success(_state({"pen": along, "pen_box": PEN_BOX}, ok))
    # across the box: tips at y = 0.15 +- 0.07 leave the 0.04 half-width
    across = ((0.0, 0.15, 0.0145), _yaw(90.0), (0, 0, 0))
    assert not PEN.success(_state({"pen": across, "pen_box": PEN_BOX}, ok))
    # one tip sticking out along x: centre at 0.05 -> tip at 0.12 > 0.10
    assert not PEN.success(
        _state({"pen": ((0.05, 0.15, 0.0145), UP, (0, 0, 0)), "pen_box": PEN_BOX}, ok)
    )
    # leaning on the rim: tilted 30 deg about y puts a tip 0.035 above the centre -> above rim
    lean = ((0.0, 0.15, 0.03), np.array([np.cos(np.pi / 12), 0, np.sin(np.pi / 12), 0]), (0, 0, 0))
    assert not PEN.success(_state({"pen": lean, "pen_box": PEN_BOX}, ok))
    assert not PEN.success(
        _state({"pen": along, "pen_box": PEN_BOX}, ok + [("pen", "left_pad"), ("pen", "right_pad")])
    )
