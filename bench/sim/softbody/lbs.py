"""Gaussians that follow spring-mass nodes by linear blend skinning (PhysTwin's renderer update).

Binding (once, at rest): each Gaussian takes its ``k`` nearest nodes, weighted by inverse
distance (normalised). Each node's local rigid motion (rotation ``R_n``, from the Kabsch fit
of its ``node_k`` nearest rest neighbours to their current positions, and its displacement)
moves the Gaussian::

    mean = sum_n w_n (R_n (mu0 - p_n^0) + p_n)
    rot  = normalise(sum_n w_n q_n) * rot0      (q_n the quaternion of R_n, sign-aligned)

When every node moves by the same rigid transform, all ``R_n`` equal it and the Gaussians
move rigidly (tested to 1e-6).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench.geometry import mat_to_quat_batch, quat_mul


def _kabsch_batch(rest: np.ndarray, now: np.ndarray) -> np.ndarray:  # [N, K, 3] x2 -> [N, 3, 3]
    a = rest - rest.mean(1, keepdims=True)
    b = now - now.mean(1, keepdims=True)
    u, _, vt = np.linalg.svd(np.einsum("nki,nkj->nij", b, a))
    d = np.sign(np.linalg.det(u @ vt))
    u[:, :, 2] *= d[:, None]
    return u @ vt


@dataclass(frozen=True, eq=False)
class LBSBinding:
    """Gaussian-to-node skinning weights.

    Attributes:
        rest_nodes: [N, 3] node positions at binding.
        rest_means: [G, 3] Gaussian means at binding.
        rest_quats: [G, 4] Gaussian rotations (w, x, y, z) at binding.
        nodes: [G, k] bound node indices.
        weights: [G, k] skinning weights (rows sum to 1).
        node_neighbours: [N, node_k] neighbours used for each node's rotation fit.
    """

    rest_nodes: np.ndarray
    rest_means: np.ndarray
    rest_quats: np.ndarray
    nodes: np.ndarray
    weights: np.ndarray
    node_neighbours: np.ndarray

    @classmethod
    def bind(
        cls,
        means: np.ndarray,  # [G, 3]
        quats: np.ndarray,  # [G, 4]
        rest_nodes: np.ndarray,  # [N, 3]
        *,
        k: int = 4,
        node_k: int = 8,
    ) -> LBSBinding:
        """Bind Gaussians to their ``k`` nearest nodes (inverse-distance weights)."""
        from scipy.spatial import cKDTree

        rest_nodes = np.asarray(rest_nodes, np.float64)
        if len(rest_nodes) < 3:
            raise ValueError("LBS needs at least 3 nodes")
        k = min(k, len(rest_nodes))
        tree = cKDTree(rest_nodes)
        dist, idx = tree.query(np.asarray(means, np.float64), k=k)
        dist, idx = dist.reshape(len(means), k), idx.reshape(len(means), k)
        w = 1.0 / np.maximum(dist, 1e-6)
        w /= w.sum(1, keepdims=True)
        node_k = min(node_k, len(rest_nodes))
        _, neighbours = tree.query(rest_nodes, k=node_k)
        q = np.asarray(quats, np.float64)
        q = q / np.linalg.norm(q, axis=1, keepdims=True)
        return cls(rest_nodes, np.asarray(means, np.float64), q, idx, w, neighbours)

    def node_rotations(self, nodes_now: np.ndarray) -> np.ndarray:  # [N, 3] -> [N, 3, 3]
        """Each node's local rotation from rest: Kabsch fit over its rest neighbourhood."""
        nb = self.node_neighbours
        return _kabsch_batch(self.rest_nodes[nb], np.asarray(nodes_now, np.float64)[nb])

    def deform(self, nodes_now: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Gaussian means [G, 3] and rotations [G, 4] (w, x, y, z) for node positions [N, 3]."""
        nodes_now = np.asarray(nodes_now, np.float64)
        rot = self.node_rotations(nodes_now)
        idx, w = self.nodes, self.weights
        offsets = self.rest_means[:, None, :] - self.rest_nodes[idx]  # [G, k, 3]
        moved = np.einsum("gkij,gkj->gki", rot[idx], offsets) + nodes_now[idx]
        means = (w[..., None] * moved).sum(1)
        q = mat_to_quat_batch(rot)[idx]  # [G, k, 4]
        q = q * np.sign(np.einsum("gki,gi->gk", q, q[:, 0]))[..., None]  # one hemisphere
        blend = (w[..., None] * q).sum(1)
        blend /= np.linalg.norm(blend, axis=1, keepdims=True)
        return means, quat_mul(blend, self.rest_quats)

    def apply(self, splats, nodes_now: np.ndarray):
        """A copy of ``splats`` (the bound Gaussians, in order) moved to ``nodes_now``."""
        means, quats = self.deform(nodes_now)
        return splats.replace(means=means.astype(np.float32), quats=quats.astype(np.float32))
