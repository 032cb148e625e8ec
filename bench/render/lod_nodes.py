"""The LOD tree's per-node and per-merged-row records, shared by the builder and the native cut.

One job: the data layout both sides of the level-of-detail tree agree on.
:mod:`bench.render.lod` builds the tree (numpy) and writes one :data:`NODE_DTYPE` record
per node and one :func:`layer_codes` code per merged Gaussian; :mod:`bench.render.warp_lod`
reads the same records (its ``LodNode`` struct has the same 32-byte layout) and codes in its
per-frame kernel. Neither imports the other for them; both import this module.
"""

from __future__ import annotations

import numpy as np

# One tree node as the per-frame cut reads it (``warp_lod.LodNode`` has the same layout).
# ``layered``: a merged node on a layered split whose far side may be pushed (the cut
# computes a push for those rows only).
NODE_DTYPE = np.dtype([("sigma", "<f8"), ("colour_std", "<f8"), ("child_lo", "<i4"),
                       ("child_hi", "<i4"), ("row", "<i4"), ("mixed", "?"), ("layered", "?")],
                      align=True)


def layer_codes(merged_layer: np.ndarray, merged_side: np.ndarray,  # [P], [P]
                covered: np.ndarray) -> np.ndarray:  # [P] bool -> [P] int32
    """Per merged row: 2 x its layered split + (side > 0) where a push may apply, else -1.

    Where :func:`bench.render.lod.far_layer_bias` may push a row: on a layered split, on one
    side of its gap, and covered by the other side (the nodes' ``layered`` flag is
    ``code >= 0``).
    """
    return np.where((merged_layer >= 0) & (merged_side != 0) & covered,
                    2 * merged_layer + (merged_side > 0), -1).astype(np.int32)
