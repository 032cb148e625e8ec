"""GaussianSplats.concat keeps extra-property dtypes (floaters append to scans with int labels)."""

import numpy as np

from bench.scene.gaussians import GaussianSplats


def test_concat_zero_fills_missing_extras_with_their_dtype():
    scan = GaussianSplats.empty(sh_degree=1)
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
