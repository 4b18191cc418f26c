"""Actor and critic networks (flax.linen MLPs) and the deployable policy function."""

from __future__ import annotations

from typing import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
from brax.training.acme import running_statistics


class MLP(nn.Module):
    hidden: Sequence[int]
    out: int
    out_scale: float = 1.0  # small last-layer init keeps initial actions near the default pose

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for width in self.hidden:
            x = nn.elu(nn.Dense(width)(x))
        init = nn.initializers.variance_scaling(self.out_scale, "fan_avg", "uniform")
        return nn.Dense(self.out, kernel_init=init)(x)


class Actor(nn.Module):
    """Gaussian policy with a state-independent log standard deviation; the mean is tanh-bounded."""

    hidden: Sequence[int]
    action_size: int
    init_log_std: float = -1.0

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        mean = jnp.tanh(MLP(self.hidden, self.action_size, out_scale=0.01)(obs))
        log_std = self.param("log_std", nn.initializers.constant(self.init_log_std), (self.action_size,))
        return mean, log_std


class Critic(nn.Module):
    hidden: Sequence[int]

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        return MLP(self.hidden, 1)(obs)[..., 0]


def actor_obs(obs):
    """The actor's part of an observation (the whole array, or the "state" entry of a dict)."""
    return obs["state"] if isinstance(obs, dict) else obs


def critic_obs(obs):
    return obs["privileged_state"] if isinstance(obs, dict) else obs


def make_policy_factory(actor: Actor) -> Callable:
    """``make_policy(params, deterministic)`` in the Brax shape: params = (normalizer, actor params)."""

    def make_policy(params, deterministic: bool = True) -> Callable:
        normalizer, actor_params = params

        def policy(obs: jax.Array, key: jax.Array) -> tuple[jax.Array, dict]:
            # Normalize the whole observation (the statistics share its structure), then select.
            mean, log_std = actor.apply(actor_params, actor_obs(running_statistics.normalize(obs, normalizer)))
            if deterministic:
                return mean, {}
            return mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape), {}

        return policy

    return make_policy
