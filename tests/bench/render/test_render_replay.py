"""bench.render.replay: a recorded launch replays with every changed input repacked."""

import numpy as np
import warp as wp

from bench.render import replay


@wp.kernel
def _scaled(x: wp.array(dtype=float), a: float, shift: wp.vec2, k: int,
            out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = a * x[i] + shift[0] + float(k)


class _Owner:
    pass


def _expect(x, a, shift, k, n):
    return (np.float32(a) * x[:n] + np.float32(shift[0]) + np.float32(k)).astype(np.float32)


def test_replay_matches_a_plain_launch_as_inputs_change():
    owner = _Owner()
    x = wp.array(np.arange(8, dtype=np.float32), device="cpu")
    y = wp.array(np.arange(8, dtype=np.float32) * 10, device="cpu")
    out = wp.zeros(8, dtype=float, device="cpu")
    calls = [  # (array, scalar a, vec, int, dim)
        (x, 9.0, (9.0, 0.0), 9, 0),  # an empty grid first: nothing runs, nothing recorded
        (x, 2.0, (1.0, 0.0), 3, 8),
        (x, 2.0, (1.0, 0.0), 3, 8),  # nothing changed: a pure replay
        (x, -1.5, (1.0, 0.0), 3, 8),  # a float
        (y, -1.5, (1.0, 0.0), 3, 8),  # another array object
        (y, -1.5, (4.0, 0.0), 7, 8),  # a vector and an int
        (x, 0.5, (0.0, 0.0), 0, 5),  # fewer threads: the rest of out is left as it was
        (y, 7.0, (7.0, 0.0), 7, 0),  # an empty grid between: nothing runs
        (x, 0.5, (0.0, 0.0), 0, 5),
    ]
    for arr, a, shift, k, n in calls:
        before = out.numpy().copy()
        replay.launch(owner, _scaled, dim=n, device="cpu",
                      inputs=[arr, a, wp.vec2(*shift), k, out])
        got = out.numpy()
        np.testing.assert_array_equal(got[:n], _expect(arr.numpy(), a, shift, k, n))
        np.testing.assert_array_equal(got[n:], before[n:])
    assert list(owner._launches) == [_scaled]  # one recorded launch, replayed throughout


def test_equal_scalars_of_another_type_are_repacked():
    owner = _Owner()
    x = wp.array(np.ones(4, dtype=np.float32), device="cpu")
    out = wp.zeros(4, dtype=float, device="cpu")
    replay.launch(owner, _scaled, dim=4, device="cpu", inputs=[x, 2, wp.vec2(0.0, 0.0), 1, out])
    replay.launch(owner, _scaled, dim=4, device="cpu",
                  inputs=[x, 2.5, wp.vec2(0.0, 0.0), True, out])  # int -> float, int -> bool
    np.testing.assert_array_equal(out.numpy(), np.full(4, 3.5, np.float32))
