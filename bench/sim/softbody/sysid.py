"""System identification: global spring stiffness and damping from a recorded trajectory.

The forward simulation is the same per-substep Warp kernels as :class:`SpringMassSim`
(``forces_kernel``, ``springs_kernel``, ``update_kernel``), written out of place (one state
array per substep) and recorded on a ``wp.Tape``. The loss is the mean squared node-position
error against the recording; ``tape.backward`` gives its gradient with respect to
``log k`` and ``log c`` and Adam (on the log parameters, so both stay positive) takes
``steps`` steps. Contacts are not in the identification model: record free or hanging motion
(PhysTwin fits its springs the same way, to tracked free motion of the object).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench.sim.softbody.model import SpringMassConfig, SpringMassModel


@dataclass(frozen=True)
class SysIdResult:
    """Fitted parameters and the loss history (m^2, mean squared position error)."""

    stiffness: float
    damping: float
    losses: list[float]


def _kernels():
    import warp as wp

    @wp.kernel
    def broadcast(log_value: wp.array(dtype=float), out: wp.array(dtype=float)):
        out[wp.tid()] = wp.exp(log_value[0])

    @wp.kernel
    def squared_error(x: wp.array(dtype=wp.vec3), target: wp.array(dtype=wp.vec3),
                      scale: float, loss: wp.array(dtype=float)):
        i = wp.tid()
        d = x[i] - target[i]
        wp.atomic_add(loss, 0, scale * wp.dot(d, d))

    return broadcast, squared_error


class TrajectoryFit:
    """Differentiable rollout of ``model`` over ``frames`` recorded frames (no contacts)."""

    def __init__(self, model: SpringMassModel, config: SpringMassConfig,
                 recorded: np.ndarray, *, device: str = "cpu") -> None:  # recorded [T, N, 3]
        from bench.sim.softbody.sim import SpringMassSim, init_warp

        wp = init_warp()
        if config.ground_height is not None or config.self_collision:
            raise ValueError("system identification runs without ground or self contacts")
        self.wp, self.device, self.config = wp, device, config
        self.sim = SpringMassSim(model, config, device=device, mode="launches")
        self.recorded = np.asarray(recorded, np.float32)
        if self.recorded.shape[1:] != (model.num_nodes, 3):
            raise ValueError(f"recorded must be [T, {model.num_nodes}, 3]")
        self.frames = len(self.recorded)
        steps = self.frames * config.substeps
        n, s = model.num_nodes, model.num_springs
        self.xs = [wp.array(model.positions.astype(np.float32), dtype=wp.vec3, device=device,
                            requires_grad=True)]
        self.vs = [wp.array(model.velocities.astype(np.float32), dtype=wp.vec3, device=device,
                            requires_grad=True)]
        for _ in range(steps):
            self.xs.append(wp.zeros(n, dtype=wp.vec3, device=device, requires_grad=True))
            self.vs.append(wp.zeros(n, dtype=wp.vec3, device=device, requires_grad=True))
        self.fs = [wp.zeros(n, dtype=wp.vec3, device=device, requires_grad=True)
                   for _ in range(steps)]
        self.targets = [wp.array(frame, dtype=wp.vec3, device=device) for frame in self.recorded]
        self.log_k = wp.zeros(1, dtype=float, device=device, requires_grad=True)
        self.log_c = wp.zeros(1, dtype=float, device=device, requires_grad=True)
        self.k = wp.zeros(s, dtype=float, device=device, requires_grad=True)
        self.c = wp.zeros(s, dtype=float, device=device, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)
        self.scratch = [wp.zeros(1, dtype=wp.vec3, device=device) for _ in range(2)]

    def loss_and_grad(self, log_k: float, log_c: float) -> tuple[float, np.ndarray]:
        """Loss (m^2) and its gradient [d/dlog k, d/dlog c]."""
        from bench.sim.softbody import kernels as K

        wp, sim, cfg, dev = self.wp, self.sim, self.config, self.device
        broadcast, squared_error = _kernels()
        self.log_k.assign(np.array([log_k], np.float32))
        self.log_c.assign(np.array([log_c], np.float32))
        self.loss.zero_()
        n, s = sim.model.num_nodes, sim.model.num_springs
        scale = 1.0 / (self.frames * n)
        tape = wp.Tape()
        with tape:
            wp.launch(broadcast, dim=s, inputs=[self.log_k, self.k], device=dev)
            wp.launch(broadcast, dim=s, inputs=[self.log_c, self.c], device=dev)
            step = 0
            for frame in range(self.frames):
                for offset in range(cfg.substeps):
                    x, v, f = self.xs[step], self.vs[step], self.fs[step]
                    wp.launch(K.forces_kernel, dim=n, device=dev,
                              inputs=[v, sim.mass, wp.vec3(*cfg.gravity), cfg.drag, f])
                    wp.launch(K.springs_kernel, dim=s, device=dev,
                              inputs=[x, v, sim.si, sim.sj, self.k, self.c, sim.rest, f])
                    wp.launch(K.update_kernel, dim=n, device=dev,
                              inputs=[sim.step0, offset, cfg.substeps, cfg.dt,
                                      cfg.particle_radius, 0, 0.0, 0.0, x, v, f, sim.mass,
                                      sim.attach, sim.attach_local, *sim._collider_args(),
                                      self.xs[step + 1], self.vs[step + 1], sim.body_force,
                                      sim.body_torque, sim.c_normal])
                    step += 1
                wp.launch(squared_error, dim=n, device=dev,
                          inputs=[self.xs[step], self.targets[frame], scale, self.loss])
        tape.backward(loss=self.loss)
        grad = np.array([self.log_k.grad.numpy()[0], self.log_c.grad.numpy()[0]], np.float64)
        value = float(self.loss.numpy()[0])
        tape.zero()
        return value, grad


def fit_stiffness_damping(
    model: SpringMassModel,
    config: SpringMassConfig,
    recorded: np.ndarray,  # [T, N, 3] node positions after each frame
    *,
    init_stiffness: float,
    init_damping: float,
    steps: int = 60,
    learning_rate: float = 0.05,
    device: str = "cpu",
) -> SysIdResult:
    """Fit one global stiffness (N/m) and damping (N s/m) with Adam on their logs."""
    if init_stiffness <= 0 or init_damping <= 0:
        raise ValueError("initial stiffness and damping must be > 0")
    fit = TrajectoryFit(model, config, recorded, device=device)
    theta = np.log([init_stiffness, init_damping])
    m1, m2 = np.zeros(2), np.zeros(2)
    beta1, beta2, eps = 0.9, 0.999, 1e-12
    losses = []
    for t in range(1, steps + 1):
        value, grad = fit.loss_and_grad(*theta)
        losses.append(value)
        m1 = beta1 * m1 + (1 - beta1) * grad
        m2 = beta2 * m2 + (1 - beta2) * grad**2
        step = learning_rate * (m1 / (1 - beta1**t)) / (np.sqrt(m2 / (1 - beta2**t)) + eps)
        theta = theta - step
    return SysIdResult(float(np.exp(theta[0])), float(np.exp(theta[1])), losses)
