"""Short-Horizon Actor-Critic (Xu et al., 2022) in JAX, readable top to bottom.

One jitted ``update`` does a whole iteration:
  1. Actor: roll the policy out for ``horizon`` control steps through the differentiable task,
     starting from the carried-over environment state with its gradient cut, and
     backpropagate the discounted reward plus the discounted target-critic value at the window
     end (zero on termination, bootstrapped on truncation). Each environment's gradient is
     clipped relative to the batch median before they are summed (``env_grad_clip``; or the
     largest left out, ``env_grad_trim``).
  2. Critic: fit TD(lambda) targets computed with the target critic, in minibatches.
  3. Polyak-average the target critic; update observation statistics.
A non-finite gradient never reaches the parameters, nor does an update that would leave
non-finite parameters or observation statistics: that update is skipped and counted.
Environments are a leading batch axis that callers shard over devices (``parallel.shard_batch``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax
from brax import envs
from brax.envs.wrappers import training
from brax.training.acme import running_statistics, specs
from flax import struct

from smoothloco.train.networks import Actor, Critic, actor_obs, critic_obs
from smoothloco.validation import require_finite, setting

# Observations arrive scaled to O(1) (tasks.controller.OBS_LAYOUT); a feature that barely varies
# (a command range of zero width, a joint that never moves) must not be blown up by 1/std.
OBS_STD_FLOOR = 0.05


@dataclass(frozen=True)
class SHACConfig:
    # Few environments per update: every sample then feeds more, smaller actor steps. Measured on
    # the same 1.05M-step budget (results/sample-efficiency/frontier): 32 environments walk from
    # 0.33M steps, 64 from 0.66M, 256 from 1.64M (on 3.3M), and 32 also end the most accurate.
    num_envs: int = setting(32, "parallel environments (split over all devices)")
    # control steps per actor window; 16 walked later than 32 (64 environments)
    horizon: int = setting(32, "control steps per SHAC window (how far gradients flow back through the simulator)")
    iterations: int = setting(
        1024,
        "training iterations; environment steps = iterations * num_envs * horizon. With --resume: train to this "
        "iteration (>= the checkpoint's; more than a finished run's extends it). The learning-rate decay and the "
        "contact sharpness (task.sharpness) reach their end at the last iteration, so extending a run moves their end "
        "point",
    )
    gamma: float = setting(0.99, "discount factor per control step")
    td_lambda: float = setting(0.95, "lambda of the critic's TD(lambda) targets")
    # measured with the trot generator: 1e-3 reached 0.21 m/s in 140 iterations, 2e-3 0.11
    actor_lr: float = setting(2e-3, "actor learning rate (Adam)")
    # A critic that follows the policy faster: on 1.05M steps (results/sample-efficiency/critic),
    # 2e-3 walked from 0.26M / 0.39M / 0.39M steps and ended at 0.043 / 0.038 / 0.050 m/s (1e-3:
    # 0.33M / 0.39M, 0.045 / 0.047; 5e-4: 0.52M).
    critic_lr: float = setting(2e-3, "critic learning rate (Adam)")
    lr_decay: bool = setting(True, "decay both learning rates linearly to 10 % over the run")
    max_grad_norm: float = setting(1.0, "clip the global norm of each actor and critic gradient at this value")
    # Each environment's actor gradient is clipped at this multiple of the batch's median norm
    # before averaging (0 turns it off). Through contact, a few environments' gradients are
    # orders of magnitude larger than the rest and point anywhere: measured on the task, the
    # largest 10 % carry 98-99.6 % of the squared norm, and the mean gradients of two halves of a
    # batch have cosine ~0; clipped at the median, 0.65.
    env_grad_clip: float = setting(
        1.0, "clip each environment's actor gradient at this multiple of the batch median norm (0 = off)"
    )
    # Another robust aggregation, for comparison with the clip: leave out this fraction of the
    # environments, those with the largest gradient norms, and rescale the rest to the batch
    # (a trimmed mean; 0 keeps every environment).
    env_grad_trim: float = setting(
        0.0,
        "leave out this fraction of the environments with the largest actor gradient norms and rescale the rest to the "
        "batch, a trimmed mean (0 = off)",
    )
    critic_epochs: int = setting(8, "passes over each iteration's data when fitting the critic")
    critic_minibatches: int = setting(4, "minibatches per critic pass; must divide num_envs * horizon")
    target_critic_alpha: float = setting(
        0.2, "target critic smoothing: target <- alpha * target + (1 - alpha) * critic"
    )
    actor_hidden: tuple[int, ...] = setting((128, 128, 64), "hidden layer sizes of the actor network")
    critic_hidden: tuple[int, ...] = setting((128, 128), "hidden layer sizes of the critic network")
    init_log_std: float = setting(-1.0, "initial log standard deviation of the actor's exploration noise")
    episode_length: int = setting(
        1000, "control steps before an episode is cut off (bootstrapped, not a fall); 1000 = 20 s at 50 Hz"
    )
    seed: int = setting(0, "random seed")

    def __post_init__(self) -> None:
        require_finite("shac", self)
        for name in ("num_envs", "horizon", "iterations", "critic_epochs", "critic_minibatches", "episode_length"):
            if getattr(self, name) < 1:
                raise ValueError(f"shac.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("gamma", "td_lambda", "target_critic_alpha"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"shac.{name} must be in [0, 1], got {getattr(self, name)}")
        if self.env_grad_clip < 0:
            raise ValueError(f"shac.env_grad_clip must be >= 0 (0 = off), got {self.env_grad_clip}")
        if not 0.0 <= self.env_grad_trim < 1.0:
            raise ValueError(f"shac.env_grad_trim must be in [0, 1) (0 = off), got {self.env_grad_trim}")
        for name in ("actor_lr", "critic_lr", "max_grad_norm"):
            if not getattr(self, name) > 0:
                raise ValueError(f"shac.{name} must be > 0, got {getattr(self, name)}")
        if (self.num_envs * self.horizon) % self.critic_minibatches:
            raise ValueError("shac.num_envs * shac.horizon must divide into shac.critic_minibatches")

    def to_dict(self) -> dict:
        return asdict(self)


@struct.dataclass
class TrainState:
    actor_params: Any
    critic_params: Any
    target_critic_params: Any
    actor_opt: Any
    critic_opt: Any
    normalizer: running_statistics.RunningStatisticsState
    rng: jax.Array
    iteration: jax.Array
    env_steps: jax.Array
    skipped_updates: jax.Array  # actor, critic and normalizer updates left out as non-finite


@dataclass
class SHAC:
    """The algorithm bound to an environment: ``init`` and the jitted ``update``."""

    env: envs.Env  # batched (vmapped, episode-wrapped) environment
    config: SHACConfig
    actor: Actor = field(init=False)
    critic: Critic = field(init=False)

    def __post_init__(self) -> None:
        c = self.config
        self.actor = Actor(c.actor_hidden, self.env.action_size, c.init_log_std)
        self.critic = Critic(c.critic_hidden)
        self.actor_optimizer = _optimizer(c.actor_lr, c)
        self.critic_optimizer = _optimizer(c.critic_lr, c)

    # -- setup ------------------------------------------------------------------------------
    def init(self, key: jax.Array) -> tuple[TrainState, envs.State]:
        actor_key, critic_key, env_key, rng = jax.random.split(key, 4)
        env_state = self.env.reset(jax.random.split(env_key, self.config.num_envs))
        obs_spec = jax.tree.map(lambda x: specs.Array(x.shape[1:], jnp.float32), env_state.obs)
        normalizer = running_statistics.init_state(obs_spec)
        one = jax.tree.map(lambda x: x[0], env_state.obs)
        actor_params = self.actor.init(actor_key, actor_obs(one))
        critic_params = self.critic.init(critic_key, critic_obs(one))
        state = TrainState(
            actor_params=actor_params,
            critic_params=critic_params,
            target_critic_params=critic_params,
            actor_opt=self.actor_optimizer.init(actor_params),
            critic_opt=self.critic_optimizer.init(critic_params),
            # Identity until the first window is seen: reset observations have zero velocities,
            # and statistics of those alone would scale the next observations by ~1e6.
            normalizer=normalizer,
            rng=rng,
            iteration=jnp.zeros((), jnp.int32),
            env_steps=jnp.zeros((), jnp.int32),
            skipped_updates=jnp.zeros((), jnp.int32),
        )
        return state, env_state

    # -- one iteration ------------------------------------------------------------------------
    def update(self, ts: TrainState, env_state: envs.State) -> tuple[TrainState, envs.State, dict]:
        c = self.config
        rng, actor_key, critic_key = jax.random.split(ts.rng, 3)
        env_state = jax.lax.stop_gradient(env_state)  # the window starts here; nothing flows back
        progress = self.progress(ts.iteration)
        env_state = self._with_progress(env_state, progress)

        # One copy of the actor per environment, so one backward pass yields every environment's
        # own gradient (their sum is the usual batch gradient).
        per_env_params = jax.tree.map(lambda p: jnp.broadcast_to(p, (c.num_envs, *p.shape)), ts.actor_params)
        (loss, (env_state, traj)), per_env_grads = jax.value_and_grad(self._actor_loss, has_aux=True)(
            per_env_params, ts, env_state, actor_key, progress
        )
        grads, env_grad_norms = clipped_sum(per_env_grads, c.env_grad_clip, c.env_grad_trim)
        actor_params, actor_opt, actor_ok = _guarded_step(self.actor_optimizer, grads, ts.actor_params, ts.actor_opt)

        targets = td_lambda_targets(
            traj["reward"], traj["next_value"], traj["done"], traj["truncation"], c.gamma, c.td_lambda
        )
        critic_params, critic_opt, critic_loss, critic_ok = self._fit_critic(
            ts, traj["critic_obs"], targets, critic_key
        )
        alpha = c.target_critic_alpha
        target = jax.tree.map(lambda t, p: alpha * t + (1 - alpha) * p, ts.target_critic_params, critic_params)

        normalizer, normalizer_ok = _guarded_normalizer_update(ts.normalizer, traj["obs"])
        skipped = sum((~ok).astype(jnp.int32) for ok in (actor_ok, critic_ok, normalizer_ok))

        ts = ts.replace(
            actor_params=actor_params,
            actor_opt=actor_opt,
            critic_params=critic_params,
            critic_opt=critic_opt,
            target_critic_params=target,
            normalizer=normalizer,
            rng=rng,
            iteration=ts.iteration + 1,
            env_steps=ts.env_steps + c.num_envs * c.horizon,
            skipped_updates=ts.skipped_updates + skipped,
        )
        metrics = {
            "actor_loss": loss,
            "critic_loss": critic_loss,
            "actor_grad_norm": optax.global_norm(grads),
            "env_grad_norm_median": jnp.median(env_grad_norms),
            "env_grad_norm_max": jnp.max(env_grad_norms),
            "reward_per_step": jnp.mean(traj["reward"]),
            "episode_ends": jnp.sum(traj["done"]),
            "falls": jnp.sum(traj["done"] * (1 - traj["truncation"])),
            "value_mean": jnp.mean(targets),
            "skipped_updates": ts.skipped_updates,
            "action_std": jnp.mean(jnp.exp(actor_params["params"]["log_std"])),
            **{k: jnp.mean(v) for k, v in traj["metrics"].items()},
            "training_progress": progress,
        }
        return ts, env_state, metrics

    def progress(self, iteration: jax.Array) -> jax.Array:
        """How far training is at ``iteration``: 0 at the first, 1 at the last (``iterations``)."""
        return jnp.clip(iteration / max(self.config.iterations - 1, 1), 0.0, 1.0)

    def _with_progress(self, env_state: envs.State, progress: jax.Array) -> envs.State:
        """The environments told how far training is, where they take it
        (``with_training_progress``: the task sharpens its contact over the run)."""
        with_progress = getattr(self.env, "with_training_progress", None)
        return env_state if with_progress is None else with_progress(env_state, progress)

    def _actor_loss(self, actor_params, ts: TrainState, env_state: envs.State, key: jax.Array, progress: jax.Array):
        c = self.config
        normalize = lambda obs: running_statistics.normalize(obs, ts.normalizer)  # noqa: E731
        target_value = lambda obs: self.critic.apply(ts.target_critic_params, critic_obs(normalize(obs)))  # noqa: E731

        def step(carry, key):
            env_state, discount, ret = carry
            noise_key, reset_key = jax.random.split(key)
            mean, log_std = jax.vmap(self.actor.apply)(actor_params, actor_obs(normalize(env_state.obs)))
            action = mean + jnp.exp(log_std) * jax.random.normal(noise_key, mean.shape)
            next_state = self.env.step(env_state, action)
            done, truncation = next_state.done, next_state.info["truncation"]
            next_value = target_value(next_state.obs)  # pre-reset observation
            ret = ret + discount * next_state.reward
            ret = ret + jnp.where(done, discount * c.gamma * truncation * next_value, 0.0)
            discount = jnp.where(done, 1.0, discount * c.gamma)
            record = {
                "obs": jax.lax.stop_gradient(env_state.obs),
                "critic_obs": jax.lax.stop_gradient(critic_obs(normalize(env_state.obs))),
                "reward": jax.lax.stop_gradient(next_state.reward),
                "next_value": jax.lax.stop_gradient(next_value),
                "done": done,
                "truncation": truncation,
                "metrics": jax.lax.stop_gradient(next_state.metrics),
            }
            return (self._reset_done(next_state, reset_key, progress), discount, ret), record

        n = c.num_envs
        init = (env_state, jnp.ones(n), jnp.zeros(n))
        (env_state, discount, ret), traj = jax.lax.scan(step, init, jax.random.split(key, c.horizon))
        last_done = traj["done"][-1]
        ret = ret + jnp.where(last_done, 0.0, discount * target_value(env_state.obs))
        loss = -jnp.mean(ret) / c.horizon
        return loss, (jax.lax.stop_gradient(env_state), traj)

    def _reset_done(self, state: envs.State, key: jax.Array, progress: jax.Array) -> envs.State:
        """Fresh episodes where ``done``, at the training's progress; the reset cuts the gradient
        (nothing flows from it)."""
        fresh = self._with_progress(self.env.reset(jax.random.split(key, self.config.num_envs)), progress)
        return start_episodes(self.env, state.done, state, fresh)

    def _fit_critic(self, ts: TrainState, obs, targets: jax.Array, key: jax.Array):
        c = self.config
        flat_obs = obs.reshape(-1, obs.shape[-1])
        flat_targets = targets.reshape(-1)
        size = flat_targets.shape[0] // c.critic_minibatches

        def loss_fn(params, x, y):
            return jnp.mean((self.critic.apply(params, x) - y) ** 2)

        def epoch(carry, key):
            perm = jax.random.permutation(key, flat_targets.shape[0]).reshape(c.critic_minibatches, size)

            def minibatch(carry, idx):
                params, opt, ok, _ = carry
                loss, grads = jax.value_and_grad(loss_fn)(params, flat_obs[idx], flat_targets[idx])
                params, opt, step_ok = _guarded_step(self.critic_optimizer, grads, params, opt)
                return (params, opt, ok & step_ok, loss), None

            carry, _ = jax.lax.scan(minibatch, carry, perm)
            return carry, None

        init = (ts.critic_params, ts.critic_opt, jnp.array(True), jnp.zeros(()))
        (params, opt, ok, loss), _ = jax.lax.scan(epoch, init, jax.random.split(key, c.critic_epochs))
        return params, opt, loss, ok


def td_lambda_targets(
    rewards: jax.Array, next_values: jax.Array, dones: jax.Array, truncations: jax.Array, gamma: float, lam: float
) -> jax.Array:
    """TD(lambda) returns over a (T, N) window, computed backward.

    ``next_values[t]`` is the (target) value of the observation after step t, before any reset.
    A terminated step bootstraps nothing, a truncated one bootstraps its value, and the last
    step of the window bootstraps fully.
    """

    def backward(next_return, x):
        reward, next_value, done, truncation = x
        cont = reward + gamma * ((1 - lam) * next_value + lam * next_return)
        end = reward + gamma * truncation * next_value
        g = jnp.where(done > 0, end, cont)
        return g, g

    last = rewards[-1] + gamma * jnp.where(dones[-1] > 0, truncations[-1], 1.0) * next_values[-1]
    _, rest = jax.lax.scan(backward, last, (rewards[:-1], next_values[:-1], dones[:-1], truncations[:-1]), reverse=True)
    return jnp.concatenate([rest, last[None]], axis=0)


def clipped_sum(per_env_grads, clip: float, trim: float = 0.0) -> tuple[Any, jax.Array]:
    """Sum over the leading environment axis, each environment's gradient first clipped to
    ``clip`` times the batch median norm (no clipping when ``clip`` is 0); with ``trim`` > 0,
    the ``trim`` fraction of environments with the largest norms is left out and the rest
    scaled up to the whole batch (a trimmed mean). Also returns the norms."""
    norms = jax.vmap(optax.global_norm)(per_env_grads)
    scale = jnp.ones_like(norms)
    if clip > 0:
        scale = jnp.minimum(1.0, clip * jnp.median(norms) / jnp.maximum(norms, 1e-30))
    if trim > 0:
        kept = int(round((1.0 - trim) * norms.shape[0]))
        keep = jnp.zeros_like(norms).at[jnp.argsort(norms)[: max(kept, 1)]].set(1.0)
        scale = scale * keep * norms.shape[0] / max(kept, 1)
    summed = jax.tree.map(lambda g: jnp.tensordot(scale, g, axes=1), per_env_grads)
    return summed, norms


def _optimizer(lr: float, c: SHACConfig) -> optax.GradientTransformation:
    schedule = optax.linear_schedule(lr, 0.1 * lr, c.iterations) if c.lr_decay else lr
    return optax.chain(optax.clip_by_global_norm(c.max_grad_norm), optax.adam(schedule, b1=0.7, b2=0.95))


def _all_finite(tree) -> jax.Array:
    """A scalar bool: every floating-point entry of ``tree`` is finite (integer counters are)."""
    floats = [x for x in jax.tree.leaves(tree) if jnp.issubdtype(jnp.result_type(x), jnp.inexact)]
    return jnp.all(jnp.array([jnp.all(jnp.isfinite(x)) for x in floats])) if floats else jnp.array(True)


def _guarded_step(optimizer: optax.GradientTransformation, grads, params, opt_state):
    """Apply the update only when every gradient entry is finite and so are the parameters and
    optimizer state it leads to (a finite gradient can still overflow them, e.g. with a huge
    learning rate); otherwise keep everything. Also returns whether it was applied."""
    finite_grads = _all_finite(grads)
    safe_grads = jax.tree.map(lambda g: jnp.where(finite_grads, g, 0.0), grads)
    updates, new_opt = optimizer.update(safe_grads, opt_state, params)
    new_params = optax.apply_updates(params, updates)
    ok = finite_grads & _all_finite(new_params) & _all_finite(new_opt)
    keep = lambda new, old: jnp.where(ok, new, old)  # noqa: E731
    return jax.tree.map(keep, new_params, params), jax.tree.map(keep, new_opt, opt_state), ok


def _guarded_normalizer_update(normalizer: running_statistics.RunningStatisticsState, obs):
    """The observation statistics updated with ``obs``, or the old ones when that makes any of
    them non-finite (a diverged simulation): one bad window would otherwise turn every later
    normalized observation, and so every action, into NaN. Also returns whether it was applied."""
    new = running_statistics.update(normalizer, obs, std_min_value=OBS_STD_FLOOR)
    ok = _all_finite(new)
    return jax.tree.map(lambda n, o: jnp.where(ok, n, o), new, normalizer), ok


def where_done(done: jax.Array, fresh, old):
    """``fresh`` (a pytree batched like ``old``) in the environments where ``done``, else ``old``."""

    def pick(new, kept):
        return jnp.where(done.reshape((-1,) + (1,) * (kept.ndim - 1)) > 0, new, kept)

    return jax.tree.map(pick, fresh, old)


def start_episodes(env: envs.Env, done: jax.Array, state: envs.State, fresh: envs.State) -> envs.State:
    """``fresh`` episodes (a batch, from ``env.reset``) where ``done``, else ``state``; a task
    with ``next_episode`` (``VelocityTask``'s terrain curriculum) first carries into each
    fresh episode what the one that ended passes on."""
    next_episode = getattr(env, "next_episode", None)  # Brax's wrappers hand on the task's
    if next_episode is not None:
        fresh = jax.vmap(next_episode)(state, fresh)
    return where_done(done, fresh, state)


def make_env(task: envs.Env, episode_length: int, randomization_fn: Callable | None = None) -> envs.Env:
    """Vmapped (optionally domain-randomized) and episode-wrapped, without Brax's auto-reset,
    so the pre-reset observation stays available for truncation bootstrapping."""
    if randomization_fn is None:
        env = training.VmapWrapper(task)
    else:
        env = training.DomainRandomizationVmapWrapper(task, randomization_fn)
    return training.EpisodeWrapper(env, episode_length, action_repeat=1)
