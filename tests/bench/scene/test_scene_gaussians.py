"""GaussianSplats: activations against closed forms, validation, sets, non-finite rows."""

import math

import numpy as np
import pytest

from bench.scene.gaussians import SH_C0, GaussianSplats


def two_gaussians(k=3):
    return GaussianSplats(
        means=np.array([[0, 0, 0], [1, 2, 3]], np.float32),
        quats=np.array([[2, 0, 0, 0], [0, 3, 0, 4]], np.float32),
        log_scales=np.array([[0, math.log(2), -1], [0, 0, 0]], np.float32),
        opacity_logits=np.array([0, math.log(3)], np.float32),
        sh_dc=np.array([[0, 1, -1], [0.5, 0, 0]], np.float32),
        sh_rest=np.zeros((2, k, 3), np.float32),
        extra={"label": np.array([7, 8], np.int32)},
    )


def test_activations_match_closed_forms():
    s = two_gaussians()
    # SH_C0 = 1 / (2 sqrt(pi)), the degree-0 real spherical harmonic
    assert SH_C0 == pytest.approx(1 / (2 * math.sqrt(math.pi)), abs=1e-16)
    np.testing.assert_allclose(s.rgb()[0], [0.5, 0.5 + SH_C0, 0.5 - SH_C0], rtol=1e-6)
    # sigmoid(0) = 1/2, sigmoid(log 3) = 3 / (1 + 3)
    np.testing.assert_allclose(s.opacities(), [0.5, 0.75], rtol=1e-6)
    np.testing.assert_allclose(s.scales()[0], [1, 2, math.exp(-1)], rtol=1e-6)
    # (2, 0, 0, 0) / 2 and (0, 3, 0, 4) / 5
    np.testing.assert_allclose(s.normalized_quats(), [[1, 0, 0, 0], [0, 0.6, 0, 0.8]])
    assert s.sh_degree == 1 and s.num == len(s) == 2
    assert s.nbytes == 2 * (3 + 4 + 3 + 1 + 3 + 9) * 4 + 2 * 4  # float32 cores + int32 label


@pytest.mark.parametrize(("k", "degree"), [(0, 0), (3, 1), (8, 2), (15, 3)])
def test_sh_degree_from_rest_count(k, degree):
    assert two_gaussians(k).sh_degree == degree
    assert GaussianSplats.empty(sh_degree=degree).sh_rest.shape == (0, k, 3)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("quats", np.zeros((2, 3), np.float32), "quats has shape"),
    ("opacity_logits", np.zeros((3,), np.float32), "opacity_logits has shape"),
    ("sh_rest", np.zeros((2, 5, 3), np.float32), "expected 0, 3, 8 or 15"),
    ("sh_rest", np.zeros((2, 3), np.float32), r"expected \[N, K, 3\]"),
    ("extra", {"nx": np.zeros(3, np.float32)}, "extra property 'nx'"),
])
def test_shapes_are_validated(field, value, message):
    with pytest.raises(ValueError, match=message):
        two_gaussians().replace(**{field: value})


def test_subset_and_concat():
    s = two_gaussians()
    one = s.subset(np.array([False, True]))
    np.testing.assert_array_equal(one.means, [[1, 2, 3]])
    assert one.extra["label"].tolist() == [8]
    with pytest.raises(ValueError, match="SH degree 1 with SH degree 0"):
        GaussianSplats.concat(s, two_gaussians(k=0))


def test_concat_zero_fills_missing_extras_with_their_dtype():
    n = 4
    scan = GaussianSplats(np.ones((n, 3), np.float32), np.ones((n, 4), np.float32),
                          np.zeros((n, 3), np.float32), np.zeros(n, np.float32),
                          np.zeros((n, 3), np.float32), np.zeros((n, 3, 3), np.float32),
                          {"label": np.arange(n, dtype=np.int32),
                           "nx": np.ones(n, np.float32)})
    new = scan.subset(np.arange(2)).replace(extra={})
    both = GaussianSplats.concat(scan, new)
    assert both.extra["label"].dtype == np.int32 and both.extra["nx"].dtype == np.float32
    np.testing.assert_array_equal(both.extra["label"], [0, 1, 2, 3, 0, 0])
    np.testing.assert_array_equal(both.extra["nx"], [1, 1, 1, 1, 0, 0])


def test_nonfinite_rows_any_core_array_not_extras():
    base = two_gaussians()
    for field, index in [("means", (1, 2)), ("quats", (1, 0)), ("log_scales", (1, 1)),
                         ("opacity_logits", (1,)), ("sh_dc", (1, 0)), ("sh_rest", (1, 2, 1))]:
        arr = getattr(base, field).copy()
        arr[index] = np.inf if field != "sh_rest" else np.nan
        s = base.replace(**{field: arr})
        assert s.nonfinite_mask().tolist() == [False, True] and s.count_nonfinite() == 1, field
    extra_nan = base.replace(extra={"f": np.array([np.nan, 0.0], np.float32)})
    assert extra_nan.count_nonfinite() == 0  # extras are carried, not validated


def test_sh_basis_constants_are_defined_once():
    """The renderer's spec and the scene transforms use the storage model's SH constants;
    SH_C0 = 1 / (2 sqrt(pi)), SH_C1 = sqrt(3) / (2 sqrt(pi)) (the real SH normalisation)."""
    from bench.render import constants as K
    from bench.scene import gaussians as G
    from bench.scene import transforms as T

    for name in ("SH_C0", "SH_C1", "SH_C2", "SH_C3"):
        assert getattr(K, name) is getattr(G, name)
    assert (T.SH_C1, T.SH_C2, T.SH_C3) == (G.SH_C1, G.SH_C2, G.SH_C3)
    assert math.isclose(G.SH_C0, 1.0 / (2.0 * math.sqrt(math.pi)), rel_tol=1e-15)
    assert math.isclose(G.SH_C1, math.sqrt(3.0) / (2.0 * math.sqrt(math.pi)), rel_tol=1e-15)
