"""Study executors: where the rollouts of a study run (``serial``, ``process``, ``ray``).

Every executor runs the same unit of work, :func:`run_chunk` - a few rollouts of one
(scene, condition, task, domain) - and hands each rollout's :class:`RolloutOutcome`
back to the driver. The driver alone writes the results store
(:func:`bench.study.rollouts.commit_outcome`): a row is committed as soon as it
arrives, so resume, idempotence and "0 lost / 0 duplicated" hold whatever runs the
rollouts, and the rows are the same bytes whichever executor ran them (a rollout
depends only on its bundle, task, policy and initial condition: ``env.reset`` and
``policy.reset`` are seeded per episode).

Entries of :data:`EXECUTORS` (:func:`register_executor`; metadata ``parallel``, ``needs``,
``options``, ``check``, ``preflight``: each executor's own config checks; plugins from the
``splatbench.executors`` entry-point group, docs/extending.md):

* ``serial`` - in the driver's process, chunk by chunk (the default).
* ``process`` - a local pool (``concurrent.futures`` with the ``spawn`` context;
  default workers = all cores). Each worker keeps the last loaded background and one
  env (+ policies) per (scene, condition, task), reused across the rollouts it gets.
* ``ray`` - Ray tasks on a running cluster (``address``) or a local one; needs the
  optional ``ray`` extra and bundle paths every node can read (a shared filesystem).

Chunks are dispatched in plan order with at most ``workers`` in flight, so the
workers move through the (scene, condition) groups together and each loads a
bundle once per group. A rollout whose execution fails (an exception, a worker
process that died) is *not* a task failure: the reason goes into the study's
``executor_attempts`` table and the rollout is retried up to ``retries`` times;
after that it is recorded as a rollout error (``errors.csv``) and
``bench study run --resume`` reruns it.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.errors import BenchError
from bench.registry import Registry
from bench.study.work_unit import (  # the unit every executor runs (plugins use these)
    RolloutChunk,
    RolloutOutcome,
    WorkerState,
    run_chunk,
)

EXECUTORS: Registry[Callable[..., Any]] = Registry("executor", group="splatbench.executors")

#: :class:`ExecutorConfig` fields only some executors read (``address``: Ray's); an executor
#: lists those it reads in its ``options``, and a set one is refused for the others.
EXECUTOR_OPTIONS = ("address",)


def register_executor(name: str, run: Callable[..., Any] | None = None, *, parallel: bool,
                      description: str, needs: str | None = None,
                      options: tuple[str, ...] = (),
                      check: Callable[[ExecutorConfig], None] | None = None,
                      preflight: Callable[[ExecutorConfig], None] | None = None) -> Any:
    """Register an executor; a decorator when ``run`` is None.

    Args:
        name: ``--executor`` / spec ``executor.kind`` value.
        run: ``run(spec, chunks, driver, config)``: run every :class:`RolloutChunk` through
            :func:`run_chunk` and hand the events to ``driver`` (:class:`Driver`).
        parallel: Whether it runs chunks at once (then chunks are ``config.chunk_size``
            rollouts; else one chunk per (scene, condition, task, domain)).
        description: One line for listings.
        needs: The optional package it needs (``"ray"``), for listings.
        options: The :data:`EXECUTOR_OPTIONS` it reads (``("address",)``).
        check: ``check(config)`` raising :class:`BenchError` for a config this executor
            cannot run (called when the config is made, after the common checks).
        preflight: ``preflight(config)``: refusals that may take time or touch the network
            (an installed package, a reachable cluster), run by :func:`check_executor`
            before the study writes anything.
    """
    unknown = sorted(set(options) - set(EXECUTOR_OPTIONS))
    if unknown:
        raise ValueError(f"executor {name!r}: unknown options {unknown}; known: "
                         f"{list(EXECUTOR_OPTIONS)}")
    return EXECUTORS.register(name, run, parallel=parallel, needs=needs,
                              description=description, options=tuple(options), check=check,
                              preflight=preflight)


@dataclass(frozen=True)
class ExecutorConfig:
    """How a study's rollouts are executed (spec key ``executor``; ``bench study run`` flags).

    Not part of the study's science: it is kept out of the spec hash, so a study may be
    resumed with another executor. The CLI flags are derived from these fields
    (:func:`add_executor_arguments`).

    Attributes:
        kind: Executor registry name (``serial``, ``process``, ``ray``).
        workers: Parallel workers (count); 0 = all cores (``process``) or all the
            cluster's CPUs (``ray``). Ignored by ``serial``.
        address: Ray cluster address (``auto``, ``HOST:PORT``); "" starts a local one.
        retries: Times a rollout whose execution failed is retried (count).
        chunk_size: Rollouts per work item sent to a worker (count).
        threads: Torch intra-op threads per ``process`` worker (count); 0 = cores / workers.
        envs_per_worker: Environments each worker (or the serial driver) steps at once, as
            one :class:`~bench.sim.vector_env.SplatBenchVectorEnv` (count); rows identical
            to 1. A parallel executor's work item then holds ``chunk_size x envs_per_worker``
            rollouts, so every sub-env has an episode.
    """

    kind: str = field(default="serial", metadata={
        "flag": "--executor", "help": "where rollouts run: serial (default), process, ray"})
    workers: int = field(default=0, metadata={
        "flag": "--workers", "aliases": ("--num-workers",),
        "help": "parallel workers (count; 0 = all cores / cluster CPUs)"})
    address: str = field(default="", metadata={
        "flag": "--address", "help": "ray cluster address (auto or HOST:PORT; default: a "
        "local cluster)"})
    retries: int = field(default=2, metadata={
        "flag": "--retries", "help": "retries of a rollout whose execution failed (count)"})
    chunk_size: int = field(default=1, metadata={
        "flag": "--chunk-size", "help": "rollouts per work item sent to a worker (count)"})
    threads: int = field(default=0, metadata={
        "flag": "--threads-per-worker", "help": "torch threads of each pool worker (count; "
        "0 = cores / workers, so workers do not oversubscribe the cores)"})
    envs_per_worker: int = field(default=1, metadata={
        "flag": "--envs-per-worker", "help": "environments each worker steps at once as one "
        "vector env (count; rows identical to 1)"})

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise BenchError(EXECUTORS._unknown_message(self.kind) + "; set executor.kind / "
                             "--executor to one of them")
        for name in ("workers", "retries", "threads"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise BenchError(f"executor {name} must be an integer >= 0, got {value!r}")
        _check_caps(self)  # issue 30: bounded before any worker or thread starts
        for name in ("chunk_size", "envs_per_worker"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise BenchError(f"executor {name} must be an integer >= 1, got {value!r}")
        if not isinstance(self.address, str):
            raise BenchError(f"executor address must be a string, got {self.address!r}")
        meta = EXECUTORS.entry(self.kind).meta
        for name in EXECUTOR_OPTIONS:  # a set option this executor does not read
            option = next(f for f in dataclasses.fields(self) if f.name == name)
            if getattr(self, name) != option.default and name not in meta.get("options", ()):
                users = " or ".join(e.name for e in EXECUTORS if name in e.meta.get("options", ()))
                raise BenchError(f"{option.metadata['flag']} is for --executor {users}; drop "
                                 f"it or use {users}")
        if meta.get("check") is not None:
            meta["check"](self)

    @classmethod
    def from_dict(cls, data: Any) -> ExecutorConfig:
        """From the spec's ``executor`` value: a name, or an object of the fields."""
        if isinstance(data, str):
            data = {"kind": data}
        if not isinstance(data, dict):
            raise BenchError(f"spec key executor must be a name or an object, got {data!r}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise BenchError(f"unknown executor keys {unknown}; valid keys: {sorted(known)}")
        return cls(**data)

    def resolved_workers(self) -> int:
        """Workers to start (``process``: 0 means every core)."""
        return self.workers or (os.cpu_count() or 1)

    def resolved_threads(self) -> int:
        """Torch threads per ``process`` worker."""
        return self.threads or max(1, (os.cpu_count() or 1) // self.resolved_workers())

    def to_json(self) -> dict[str, Any]:
        """The settings as JSON (``envs_per_worker`` only when set: older configs stay)."""
        out = dataclasses.asdict(self)
        if self.envs_per_worker == 1:  # added later: run configs written before keep their bytes
            del out["envs_per_worker"]
        return out


def _check_caps(config: ExecutorConfig) -> None:
    """Refuse worker, thread and retry counts no machine can honour (issue 30)."""
    from bench.safety import MAX_RETRIES, MAX_THREADS_PER_WORKER, MAX_WORKERS

    envs = config.envs_per_worker
    if isinstance(envs, int) and envs > MAX_ENVS_PER_WORKER:  # each sub-env holds a renderer
        raise BenchError(f"executor envs_per_worker (--envs-per-worker) {envs:,} exceeds the "
                         f"cap of {MAX_ENVS_PER_WORKER}; use fewer (each env holds its own "
                         "MuJoCo model and renderer)")

    for name, flag, cap, fix in (
            ("workers", "--workers", MAX_WORKERS, "use fewer (0 = one per core)"),
            ("threads", "--threads-per-worker", MAX_THREADS_PER_WORKER,
             "use fewer (0 = cores / workers)"),
            ("retries", "--retries", MAX_RETRIES, "use fewer")):
        value = getattr(config, name)
        if value > cap:
            raise BenchError(f"executor {name} ({flag}) {value:,} exceeds the cap of {cap:,}; "
                             f"{fix}")


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    """One CLI flag per :class:`ExecutorConfig` field (default None: the spec's value)."""
    from bench.cli_fields import field_help

    for f in dataclasses.fields(ExecutorConfig):
        kind = int if f.type in ("int", int) else str
        parser.add_argument(f.metadata["flag"], *f.metadata.get("aliases", ()),
                            dest=f"exec_{f.name}", metavar=f.name.upper(), type=kind,
                            default=None,
                            help=field_help(f))


def config_from_args(args: argparse.Namespace, base: ExecutorConfig | None = None
                     ) -> ExecutorConfig:
    """``base`` (the spec's) with every flag that was given on the command line."""
    base = base or ExecutorConfig()
    given = {f.name: getattr(args, f"exec_{f.name}") for f in dataclasses.fields(ExecutorConfig)
             if getattr(args, f"exec_{f.name}", None) is not None}
    return dataclasses.replace(base, **given)


# --------------------------------------------------------------------------- executors


class Driver:
    """The driver's side of an execution: commit outcomes, count attempts, show progress.

    Args:
        commit: Called with every :class:`RolloutOutcome` / :class:`MeasuredLatency`.
        attempt_failed: Called with (rollout key, reason); returns True if the rollout
            may be retried.
        bar: A ``bench.progress.progress`` reporter (one update per rollout).
    """

    def __init__(self, commit: Callable[[Any], None],
                 attempt_failed: Callable[[tuple, str], bool], bar: Any,
                 latency: Callable[[str, str], float | None] = lambda task, policy: None
                 ) -> None:
        self.commit = commit
        self.attempt_failed = attempt_failed
        self.bar = bar
        self.latency = latency

    def refresh(self, chunk: RolloutChunk) -> RolloutChunk:
        """``chunk`` with the policy latencies known now (measured by an earlier chunk)."""
        known = tuple((p, self.latency(chunk.task, p) if m is None else m)
                      for p, m in chunk.latencies)
        return dataclasses.replace(chunk, latencies=known)

    def deliver(self, events: list[Any]) -> None:
        """Commit events in order and advance the bar once per rollout outcome."""
        for event in events:
            self.commit(event)
            if isinstance(event, RolloutOutcome):
                self.bar.update(1)

    def failed(self, spec: Any, chunk: RolloutChunk, done: set[tuple], reason: str, *,
               running_only: bool = False) -> RolloutChunk | None:
        """The rest of ``chunk`` to retry (None when nothing may be retried).

        Every rollout not in ``done`` is charged an attempt, or with ``running_only`` only
        the first of them (the one that raised; the others never started).
        """
        left = []
        charged = False
        for policy, trial in chunk.items:
            key = (spec.name, chunk.scene, chunk.condition, chunk.task, policy, chunk.domain,
                   trial)
            if key in done:
                continue
            if running_only and charged:
                left.append((policy, trial))
                continue
            charged = True
            if self.attempt_failed(key, reason):
                left.append((policy, trial))
            else:
                self.bar.update(1)
        return dataclasses.replace(chunk, items=tuple(left)) if left else None


@register_executor("serial", parallel=False,
                   description="in the driver's process, chunk by chunk (default)")
def run_serial(spec: Any, chunks: list[RolloutChunk], driver: Driver, config: ExecutorConfig
               ) -> None:
    """Run every chunk in this process; a raised exception is retried like a worker's."""
    state = WorkerState(spec, keep_env=False)
    for chunk in chunks:
        todo: RolloutChunk | None = chunk
        while todo is not None:
            done: set[tuple] = set()
            events = run_chunk(state, driver.refresh(todo))
            while True:
                try:  # only the rollouts' own errors are retried; the driver's commits raise
                    event = next(events)
                except StopIteration:
                    todo = None
                    break
                except BenchError:  # the user's to fix (a bad policy ref ...): not retried
                    state.close()
                    raise
                except Exception as exc:  # noqa: BLE001 - recorded and retried, not a failure
                    state.close()
                    todo = driver.failed(spec, todo, done, f"{type(exc).__name__}: {exc}",
                                         running_only=True)
                    break
                driver.deliver([event])
                if isinstance(event, RolloutOutcome):
                    done.add(event.key)


_WORKER: WorkerState | None = None
#: Most environments one worker steps at once (``--envs-per-worker``): each holds its own
#: MuJoCo model, GL context and render buffers; 64 is past any gain measured
#: (docs/speed/rollout.md) and bounds a worker's memory.
MAX_ENVS_PER_WORKER = 64
#: Seconds between a pool worker's checks that its driver still lives (PR_SET_PDEATHSIG's
#: fallback where the kernel has no parent-death signal).
PARENT_POLL_S = 1.0


def die_with_parent(parent: int) -> None:
    """Make this process die as soon as the process ``parent`` (the study driver) does.

    However the driver ends (SIGKILL included) its pool workers must not outlive it: they
    hold about 1 GB each and the caller's stdout (a ``$(bench study run ...)`` would
    hang). Linux: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``; everywhere: a daemon thread that
    SIGKILLs this process when ``os.getppid()`` stops being ``parent``.
    """
    import signal
    import threading
    import time

    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the watch below does it
    if os.getppid() != parent:  # the driver died before the signal was armed
        os.kill(os.getpid(), signal.SIGKILL)

    def watch() -> None:
        while True:
            time.sleep(PARENT_POLL_S)
            if os.getppid() != parent:
                os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="bench-parent-watch", daemon=True).start()


def _worker_init(spec: Any, threads: int = 0, parent: int = 0) -> None:
    global _WORKER
    if parent:  # a pool worker: dies with its driver (first: before any slow import)
        die_with_parent(parent)
    if threads:  # the pool's workers share the cores: every library's pool sized on purpose
        from bench.threads import limit_threads, limit_torch_threads

        limit_threads(threads)  # OpenMP/BLAS/llvmpipe (before the first GL context), Warp
        limit_torch_threads(threads)  # torch intra-op = threads, inter-op = 1
    if _WORKER is not None:
        _WORKER.close()
    _WORKER = WorkerState(spec)


def worker_run(chunk: RolloutChunk, spec: Any = None) -> list[Any]:
    """Run ``chunk`` in a worker process (its state kept between calls); all its events."""
    if _WORKER is None or (spec is not None and _WORKER.spec != spec):
        _worker_init(spec)
    try:
        return list(run_chunk(_WORKER, chunk))
    except BaseException:
        _WORKER.close()  # a half-used env is not reused
        raise


def _pump(spec: Any, chunks: list[RolloutChunk], driver: Driver, workers: int,
          submit: Callable[[RolloutChunk], Any], wait: Callable[[list], tuple[list, list]],
          result: Callable[[Any], list], restart: Callable[[], None],
          crashed: Callable[[BaseException], bool]) -> None:
    """Keep ``workers`` chunks in flight; commit results, retry failures (shared by pools)."""
    queue = list(reversed(chunks))
    flight: dict[Any, RolloutChunk] = {}
    while queue or flight:
        while queue and len(flight) < workers:
            chunk = queue.pop()
            flight[submit(driver.refresh(chunk))] = chunk
        finished, _ = wait(list(flight))
        broken = False
        for handle in finished:
            chunk = flight.pop(handle)
            try:
                events = result(handle)
            except BenchError:
                raise
            except Exception as exc:  # noqa: BLE001 - recorded and retried, never a failure
                broken = broken or crashed(exc)
                retry = driver.failed(spec, chunk, set(), _reason(exc))
                if retry is not None:
                    queue.append(retry)
                continue
            driver.deliver(events)
        if broken:  # a dead worker takes the pool with it: the chunks in flight are lost
            for chunk in list(flight.values()):
                retry = driver.failed(spec, chunk, set(), "worker pool broken by another "
                                      "worker's death while this ran")
                if retry is not None:
                    queue.append(retry)
            flight.clear()
            restart()


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}"[:500]


@register_executor("process", parallel=True,
                   description="local process pool (spawn), default workers = all cores")
def run_process(spec: Any, chunks: list[RolloutChunk], driver: Driver, config: ExecutorConfig
                ) -> None:
    """Run the chunks on a local ``spawn`` process pool."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor
    from concurrent.futures import wait as wait_futures
    from concurrent.futures.process import BrokenProcessPool

    workers = config.resolved_workers()
    context = multiprocessing.get_context("spawn")
    pool: list[ProcessPoolExecutor] = []

    def start() -> None:
        pool.append(ProcessPoolExecutor(max_workers=workers, mp_context=context,
                                        initializer=_worker_init,
                                        initargs=(spec, config.resolved_threads(),
                                                  os.getpid())))

    def restart() -> None:
        pool.pop().shutdown(wait=True, cancel_futures=True)
        start()

    start()
    try:
        _pump(spec, chunks, driver, workers,
              submit=lambda c: pool[-1].submit(worker_run, c),
              wait=lambda fs: tuple(wait_futures(fs, return_when=FIRST_COMPLETED)),
              result=lambda f: f.result(), restart=restart,
              crashed=lambda exc: isinstance(exc, BrokenProcessPool))
    except BaseException:  # Ctrl-C, SIGTERM / SIGHUP (bench.cli.Terminated), an error
        kill_pool_workers(pool[-1])  # no waiting for rollouts nobody will commit
        raise
    finally:
        pool[-1].shutdown(wait=True, cancel_futures=True)


def pool_worker_pids(executor: Any) -> list[int]:
    """Process ids of a ``ProcessPoolExecutor``'s workers (for tests and diagnostics)."""
    return sorted(executor._processes)  # noqa: SLF001 - no public accessor


def kill_pool_workers(executor: Any) -> None:
    """SIGKILL a ``ProcessPoolExecutor``'s workers (an interrupted driver stops at once)."""
    for process in list((executor._processes or {}).values()):  # noqa: SLF001
        try:
            process.kill()
        except (OSError, ValueError, AttributeError):
            pass


#: Seconds a TCP connection to a given ``--address`` may take before the run is refused.
RAY_CONNECT_TIMEOUT_S = 5.0
#: Ray's variable for how many times ``ray.init`` tries to reach a cluster's GCS.
RAY_WAIT_ENV = "RAY_gcs_server_port_wait_time_s"


def check_executor(config: ExecutorConfig | None) -> None:
    """Refusals of an executor that need no output folder: called before ``--out`` exists.

    Runs the executor's registered ``preflight`` (``ray``: :func:`check_ray`).

    Raises:
        BenchError: what the executor's preflight refuses.
    """
    if config is None:
        return
    preflight = EXECUTORS.entry(config.kind).meta.get("preflight")
    if preflight is not None:
        preflight(config)


def check_ray(config: ExecutorConfig) -> None:
    """Preflight of ``ray``: the package is installed and ``--address`` answers.

    A given ``--address HOST:PORT`` must accept a TCP connection within
    :data:`RAY_CONNECT_TIMEOUT_S` (Ray itself retries an unreachable address for many
    minutes, after the run wrote bundles and scores).

    Raises:
        BenchError: Ray missing, a malformed address, or no answer at it.
    """
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise BenchError("--executor ray needs the ray package; pip install 'splatbench[ray]' "
                         "or use --executor process")
    if config.address:
        check_ray_address(config.address)


def check_ray_address(address: str, *, timeout: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """Refuse a Ray ``HOST:PORT`` (or ``ray://HOST:PORT``) that accepts no TCP connection.

    ``auto`` and ``local`` are left to Ray (it finds or starts the cluster itself).

    Raises:
        BenchError: Not HOST:PORT, or nothing answers there within ``timeout`` seconds.
    """
    import socket

    if address in ("auto", "local"):
        return
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise BenchError(f"--address {address!r} is not HOST:PORT; pass the address `ray "
                         "status` shows (e.g. 10.0.0.5:6379), auto, or no --address for a "
                         "local cluster")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as exc:
        reason = f"no answer within {timeout:g} s" if isinstance(exc, TimeoutError) else \
            (exc.strerror or type(exc).__name__).lower()
        raise BenchError(f"cannot reach the ray cluster at --address {address} ({reason}); "
                         f"start it (`ray start --head --port {port}`), pass the "
                         "address `ray status` shows, or drop --address for a local cluster") \
            from None


@register_executor("ray", parallel=True, needs="ray", options=("address",),
                   preflight=check_ray,
                   description="Ray tasks on a cluster (--address) or a local one")
def run_ray(spec: Any, chunks: list[RolloutChunk], driver: Driver, config: ExecutorConfig
            ) -> None:
    """Run the chunks as Ray tasks (bundle paths must be readable by every node)."""
    try:
        import ray
    except ImportError:
        raise BenchError("--executor ray needs the ray package; pip install 'splatbench[ray]' "
                         "or use --executor process") from None
    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        bounded = False
        if config.address:
            check_ray_address(config.address)  # seconds, not Ray's minutes of retries
            kwargs["address"] = config.address
            # Ray's own connection attempts (about 40 s each, 20 by default): 2 of them
            bounded = RAY_WAIT_ENV not in os.environ
            if bounded:
                os.environ[RAY_WAIT_ENV] = "2"
        elif config.workers:
            kwargs["num_cpus"] = config.workers
        try:
            ray.init(**kwargs)
        except (ConnectionError, RuntimeError) as exc:
            raise BenchError(f"cannot reach the ray cluster {config.address!r} ({exc}); start "
                             "it (ray start --head) or pass --address HOST:PORT") from None
        finally:
            if bounded:
                os.environ.pop(RAY_WAIT_ENV, None)
        started = True
    try:
        workers = config.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        spec_ref = ray.put(spec)
        remote = ray.remote(num_cpus=1, max_retries=0)(worker_run)
        _pump(spec, chunks, driver, workers,
              submit=lambda c: remote.remote(c, spec_ref),
              wait=lambda refs: ray.wait(refs, num_returns=1),
              result=ray.get, restart=lambda: None, crashed=lambda exc: False)
    finally:
        if started:
            ray.shutdown()


def chunks_of(spec: Any, todo: dict, bundles: dict, *, size: int | None, envs: int = 1
              ) -> list[RolloutChunk]:
    """Work items: each (scene, condition, task, domain) group of ``todo`` cut into ``size``.

    ``size`` None keeps each group whole (serial: one env per group, as always); ``envs``:
    sub-envs the worker steps at once (:attr:`ExecutorConfig.envs_per_worker`).
    """
    chunks = []
    for (scene, cond, task, domain), items in todo.items():
        known = tuple((p, None) for p in spec.policies[task])
        bundle = bundles[(scene, cond)]
        step = size or len(items)
        for i in range(0, len(items), step):
            chunks.append(RolloutChunk(scene, cond, task, domain, tuple(items[i:i + step]),
                                       str(bundle.path), bundle.manifest_sha256, known,
                                       envs))
    return chunks

