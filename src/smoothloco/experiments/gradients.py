"""How informative the policy gradient is through each contact model.

For a fixed policy, the return of a window of H control steps is differentiated through the
task (what SHAC does) for several independent batches of start states and action noise, and
compared with a zeroth-order estimate of the gradient of the same windowed return (Gaussian-
smoothed central finite differences, the same batches: common random numbers).

- ``batch_cosine``: mean pairwise cosine similarity of the batches' analytic gradients
  (1: every batch points the same way; ~0: the gradient is noise);
- ``relative_std``: spread of the batch gradients around their mean, relative to its norm;
- ``zo_cosine``: cosine between the mean analytic gradient and the zeroth-order estimate, both
  in the same random ``directions``-dimensional subspace of parameter space (in all ~30k actor
  parameters a zeroth-order estimate from a few dozen samples would be noise);
- ``*_ci95``: the estimates' own uncertainty, half-widths of 95 % Student-t intervals over the
  independent batches (``zo_cosine_ci95`` of the per-batch cosines, whose mean is
  ``zo_cosine_per_batch_mean``; ``batch_cosine_ci95`` of each batch's mean cosine with the
  others). A difference between contact models smaller than these is not measured.

Hard contact is expected to give gradients that disagree across batches and with the smoothed
estimate, increasingly with the window; smoothed and soft contact to agree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import jax
import jax.numpy as jnp
import numpy as np
from brax.training.acme import running_statistics, specs
from jax.flatten_util import ravel_pytree
from scipy import stats

from smoothloco.tasks import VelocityTask, VelocityTaskConfig
from smoothloco.train.networks import Actor, actor_obs
from smoothloco.train.runs import LoadedRun
from smoothloco.train.shac import SHACConfig

ReturnsFn = Callable[[object, jax.Array], jax.Array]  # (params, key) -> (n_windows,) windowed returns


@dataclass(frozen=True)
class GradientSettings:
    windows: tuple[int, ...] = (4, 8, 16, 32)  # control steps
    batches: int = 4  # independent batches for the spread
    envs: int = 16  # environments per batch
    warmup: int = 25  # control steps of the policy before the window (feet loaded, not dropping)
    directions: int = 8  # dimension of the random subspace of the zeroth-order comparison
    samples: int = 16  # central differences of the zeroth-order estimate (>= directions)
    sigma: float = 0.02  # smoothing radius in parameter space
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.windows or min(self.windows) < 1:
            raise ValueError(f"windows must be positive step counts, got {self.windows}")
        for name in ("batches", "envs", "directions", "samples"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.batches < 2:
            raise ValueError("batches must be >= 2 to measure a spread")
        if self.warmup < 0 or not self.sigma > 0:
            raise ValueError(f"warmup must be >= 0 and sigma > 0, got {self.warmup}, {self.sigma}")


def _cosine(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.sum(a * b, -1) / (jnp.linalg.norm(a, axis=-1) * jnp.linalg.norm(b, axis=-1) + 1e-30)


def gradient_quality(returns_fn: ReturnsFn, params, settings: GradientSettings) -> dict[str, np.ndarray]:
    """``batch_cosine``, ``relative_std``, ``zo_cosine`` and ``grad_norm``, one value per window
    (the entries of ``returns_fn``'s output).

    The zeroth-order gradient is the least-squares slope of the central differences
    ``(R(θ + σUε) - R(θ - σUε)) / 2σ`` over Gaussian ``ε``: exact for a smooth function once
    ``samples >= directions``, the slope of the σ-smoothed function otherwise. The Jacobian
    (``batches`` calls) and the returns alone (``2 * samples * batches`` calls) are two compiled
    functions: a returns-only call costs a fraction of one that also differentiates.
    """
    if settings.samples < settings.directions:
        raise ValueError(f"samples ({settings.samples}) must be >= directions ({settings.directions})")
    flat, unravel = ravel_pytree(params)

    @jax.jit
    def value_and_jacobian(x: jax.Array, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        value, vjp = jax.vjp(lambda x: returns_fn(unravel(x), key), x)
        return value, jax.vmap(vjp)(jnp.eye(value.shape[0], dtype=value.dtype))[0]

    value = jax.jit(lambda x, key: returns_fn(unravel(x), key))
    batch_key, basis_key, eps_key = jax.random.split(jax.random.PRNGKey(settings.seed), 3)
    batch_keys = list(jax.random.split(batch_key, settings.batches))

    jac = jnp.stack([value_and_jacobian(flat, k)[1] for k in batch_keys], axis=1)  # (W, B, d)
    mean = jac.mean(axis=1)
    pairs = [(i, j) for i in range(settings.batches) for j in range(i + 1, settings.batches)]
    batch_cosine = jnp.mean(jnp.stack([_cosine(jac[:, i], jac[:, j]) for i, j in pairs]), axis=0)
    spread = jnp.sqrt(jnp.sum(jnp.var(jac, axis=1), axis=-1))
    relative_std = spread / (jnp.linalg.norm(mean, axis=-1) + 1e-30)

    basis, _ = jnp.linalg.qr(jax.random.normal(basis_key, (flat.shape[0], settings.directions)))  # (d, K)
    eps = jax.random.normal(eps_key, (settings.samples, settings.directions))  # (M, K)
    slopes = jnp.stack(  # (B, M, W): central differences, common random numbers per batch
        [
            jnp.stack(
                [value(flat + settings.sigma * basis @ e, k) - value(flat - settings.sigma * basis @ e, k) for e in eps]
            )
            for k in batch_keys
        ]
    ) / (2 * settings.sigma)
    zo = jnp.linalg.lstsq(eps, slopes.mean(axis=0))[0].T  # (W, K)
    zo_cosine = _cosine(mean @ basis, zo)
    # Per batch: its analytic gradient against its own zeroth-order estimate, and its mean
    # cosine with the other batches; their spread over batches gives the intervals.
    zo_per_batch = jnp.stack([jnp.linalg.lstsq(eps, slopes[b])[0].T for b in range(settings.batches)], axis=1)
    zo_cosine_per_batch = _cosine(jnp.einsum("wbd,dk->wbk", jac, basis), zo_per_batch)  # (W, B)
    pair_cosines = {pair: _cosine(jac[:, pair[0]], jac[:, pair[1]]) for pair in pairs}
    batch_cosine_per_batch = jnp.stack(
        [
            jnp.mean(jnp.stack([c for pair, c in pair_cosines.items() if b in pair]), axis=0)
            for b in range(settings.batches)
        ],
        axis=1,
    )  # (W, B)
    out = {
        "batch_cosine": batch_cosine,
        "batch_cosine_ci95": _ci95(np.asarray(batch_cosine_per_batch)),
        "relative_std": relative_std,
        "zo_cosine": zo_cosine,
        "zo_cosine_per_batch_mean": jnp.mean(zo_cosine_per_batch, axis=1),
        "zo_cosine_ci95": _ci95(np.asarray(zo_cosine_per_batch)),
        "grad_norm": jnp.linalg.norm(mean, axis=-1),
    }
    return {k: np.asarray(v, np.float64) for k, v in out.items()}


def _ci95(per_batch: np.ndarray) -> np.ndarray:
    """Half-width of the 95 % Student-t interval of the mean over the last axis (batches)."""
    n = per_batch.shape[-1]
    return stats.t.ppf(0.975, n - 1) * per_batch.std(axis=-1, ddof=1) / np.sqrt(n)


def task_returns_fn(task, actor, normalizer, warmup_params, settings: GradientSettings) -> ReturnsFn:
    """Windowed returns of ``actor`` in ``task``: a batch of ``settings.envs`` fresh episodes, a
    warm-up with the fixed ``warmup_params`` (so neither the gradient nor the finite differences
    see it), then the window with the given parameters and reparameterized action noise; rewards
    after a termination do not count. Output ``(len(windows),)``: the batch-mean return of the
    first H steps for each window H (one rollout serves every window)."""
    longest = max(settings.windows)
    ends = jnp.asarray(settings.windows) - 1

    def act(params, obs, noise):
        mean, log_std = actor.apply(params, actor_obs(running_statistics.normalize(obs, normalizer)))
        return mean + jnp.exp(log_std) * noise

    def one_env(params, key):
        reset_key, warm_key, noise_key = jax.random.split(key, 3)
        state = task.reset(reset_key)
        shape = (task.action_size,)

        def warm(state, key):
            return task.step(state, act(warmup_params, state.obs, jax.random.normal(key, shape))), None

        state, _ = jax.lax.scan(warm, state, jax.random.split(warm_key, settings.warmup))
        state = jax.lax.stop_gradient(state)
        state = state.replace(done=jnp.zeros_like(state.done))  # a fall during warm-up leaves the window empty anyway

        def window(carry, key):
            state, alive = carry
            state = task.step(state, act(params, state.obs, jax.random.normal(key, shape)))
            reward = alive * state.reward
            return (state, alive * (1.0 - state.done)), reward

        _, rewards = jax.lax.scan(window, (state, jnp.ones(())), jax.random.split(noise_key, longest))
        return jnp.cumsum(rewards)[ends]

    def returns(params, key):
        return jax.vmap(one_env, in_axes=(None, 0))(params, jax.random.split(key, settings.envs)).mean(axis=0)

    return returns


def contact_gradient_quality(
    models: Sequence[str],
    settings: GradientSettings,
    task_overrides: Callable[[str], dict] | None = None,
    run: LoadedRun | None = None,
) -> dict[str, dict[str, list[float]]]:
    """``gradient_quality`` for each contact model, in the task without pushes or randomization:
    of the initial SHAC actor (identity normalizer), or of ``run``'s trained one (a SHAC run,
    in its task at its final sharpness). ``task_overrides(model)`` adds task settings per model
    (e.g. a smaller step for ``soft``); with a ``contact`` entry, ``models`` are arm names."""
    if run is not None and run.config.algo != "shac":
        raise ValueError(f"{run.run_dir} is a {run.config.algo} run; the gradient study differentiates SHAC's actor")
    shac = run.config.shac if run else SHACConfig()
    base = replace(run.config.task, sharpness=(run.config.final_sharpness,) * 2) if run else VelocityTaskConfig()
    out = {}
    for model in models:
        config = base.quiet(**{"contact": model, **(task_overrides(model) if task_overrides else {})})
        task = VelocityTask(config)
        actor = Actor(shac.actor_hidden, task.action_size, shac.init_log_std)
        if run:
            normalizer, params = run.params
        else:
            params = actor.init(jax.random.PRNGKey(settings.seed), jnp.zeros(task.observation_size))
            normalizer = running_statistics.init_state(specs.Array((task.observation_size,), jnp.float32))
        stats = gradient_quality(task_returns_fn(task, actor, normalizer, params, settings), params, settings)
        out[model] = {"windows": list(settings.windows), **{k: v.tolist() for k, v in stats.items()}}
    return out
