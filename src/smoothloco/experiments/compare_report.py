"""The comparison's report: per-seed curves, when each algorithm first walks, the PPO / SHAC
ratios at both thresholds, ``compare.md`` and ``compare.png``, from the evaluation rows of the
runs that ``compare.compare`` trained."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np

from smoothloco import plotting
from smoothloco.train.ppo import PPOConfig
from smoothloco.train.runs import ALGORITHMS

THRESHOLD_FRACTION = 0.9
METRICS = ("episode_return", "lin_vel_error", "yaw_rate_error", "fall_rate")
# A walking policy on the evaluation grid.
WALKING = {"lin_vel_error": 0.15, "yaw_rate_error": 0.2, "fall_rate": 0.0}


def with_variants(summaries: dict[str, dict]) -> dict:
    """The headline: the variant that walks in the fewest environment steps on every seed (the
    first listed when none does), with every variant's thresholds and ratios beside it."""
    walking = {v: s["thresholds"]["walking"]["ppo"] for v, s in summaries.items()}
    reached = [v for v in summaries if walking[v]["reached_threshold"]]
    best = min(reached, key=lambda v: walking[v]["env_steps"]) if reached else next(iter(summaries))
    table = {}
    for variant, s in summaries.items():
        table[variant] = {"ppo_config": s["ppo_config"], "ppo": s["ppo"]}
        for kind, t in s["thresholds"].items():
            ratios = {k: v for k, v in t.items() if "ratio" in k}
            table[variant][kind] = {**ratios, **{f"ppo_{k}": v for k, v in t["ppo"].items()}}
    return {**summaries[best], "ppo_variant": best, "ppo_variants": table}


def seed_curves(runs: list[list[dict]]) -> dict[str, list[float]]:
    """Seed mean and spread at each evaluation; every seed has the same schedule."""
    length = min(len(r) for r in runs)
    if length == 0:
        raise ValueError("a run finished without any evaluation")
    column = lambda key: np.array([[row[key] for row in r[:length]] for r in runs], float)  # noqa: E731 (seeds, evals)
    curves = {
        "env_steps": [int(x) for x in column("env_steps")[0]],
        "train_wall_s": column("train_wall_s").mean(0).tolist(),
    }
    for metric in METRICS:
        values = column(f"eval/{metric}")
        curves[f"{metric}_mean"] = values.mean(0).tolist()
        curves[f"{metric}_min"] = values.min(0).tolist()
        curves[f"{metric}_max"] = values.max(0).tolist()
    curves["episode_return_per_seed"] = column("eval/episode_return").tolist()
    curves["train_wall_s_per_seed"] = column("train_wall_s").tolist()
    walking = np.all([column(f"eval/{m}") <= limit for m, limit in WALKING.items()], axis=0)
    curves["walking_per_seed"] = walking.tolist()
    return curves


def first_walking(curves: dict) -> dict:
    """Per seed, the environment steps and training wall-clock of its first walking evaluation;
    their mean and range when every seed walks."""
    firsts = [next((i for i, w in enumerate(seed) if w), None) for seed in curves["walking_per_seed"]]
    steps = [None if i is None else curves["env_steps"][i] for i in firsts]
    walls = [None if i is None else curves["train_wall_s_per_seed"][k][i] for k, i in enumerate(firsts)]
    reached = all(i is not None for i in firsts)
    return {
        "reached_threshold": reached,
        "seeds_reached": sum(i is not None for i in firsts),
        "per_seed_env_steps": steps,
        "per_seed_train_wall_s": walls,
        "env_steps": float(np.mean(steps)) if reached else None,
        "env_steps_min_max": [min(steps), max(steps)] if reached else None,
        "train_wall_s": float(np.mean(walls)) if reached else None,
    }


def _first_reach(curves: dict, threshold: float) -> dict:
    mean = np.asarray(curves["episode_return_mean"])
    hits = np.flatnonzero(mean >= threshold)
    per_seed = [
        next((curves["env_steps"][i] for i, v in enumerate(seed) if v >= threshold), None)
        for seed in curves["episode_return_per_seed"]
    ]
    first = hits[0] if hits.size else None
    return {
        "reached_threshold": first is not None,
        "env_steps": None if first is None else curves["env_steps"][first],
        "train_wall_s": None if first is None else curves["train_wall_s"][first],
        "per_seed_env_steps": per_seed,
    }


def _ratios(shac: dict, ppo: dict) -> dict:
    """PPO / SHAC at one threshold; None where either did not reach it, then a lower bound on the
    step ratio from PPO's whole budget when SHAC reached it."""
    both = shac["reached_threshold"] and ppo["reached_threshold"]
    out = {
        "env_steps_ratio_ppo_over_shac": ppo["env_steps"] / shac["env_steps"] if both else None,
        "wall_ratio_ppo_over_shac": ppo["train_wall_s"] / shac["train_wall_s"] if both else None,
    }
    if shac["reached_threshold"] and not ppo["reached_threshold"]:
        out["env_steps_ratio_lower_bound"] = ppo["total_env_steps"] / shac["env_steps"]
    return out


def summarize(curves: dict[str, dict], budget: dict, seeds: int, ppo_config: dict) -> dict:
    shac_final = curves["shac"]["episode_return_mean"][-1]
    value = shac_final - (1 - THRESHOLD_FRACTION) * abs(shac_final)  # = 0.9 x final when it is positive
    totals, walking, by_return = {}, {}, {}
    for algo, c in curves.items():
        steps, wall = c["env_steps"], c["train_wall_s"]
        totals[algo] = {
            "total_env_steps": steps[-1],
            "total_train_wall_s": wall[-1],
            # The first evaluation's time is mostly compilation; the speed is taken after it.
            "first_eval_train_wall_s": wall[0],
            "env_steps_per_s": (steps[-1] - steps[0]) / (wall[-1] - wall[0]) if len(steps) > 1 else None,
            "final": {m: c[f"{m}_mean"][-1] for m in METRICS},
            "best_return": max(c["episode_return_mean"]),
        }
        walking[algo] = {**first_walking(c), "total_env_steps": steps[-1]}
        by_return[algo] = {**_first_reach(c, value), "total_env_steps": steps[-1]}
    thresholds = {
        "walking": {
            "definition": "first evaluation where a seed's policy walks on the grid: linear-velocity error "
            f"<= {WALKING['lin_vel_error']} m/s, yaw-rate error <= {WALKING['yaw_rate_error']} rad/s, no falls; "
            "steps and wall-clock are means over seeds, reached only when every seed walks",
            "shac": walking["shac"],
            "ppo": walking["ppo"],
            **_ratios(walking["shac"], walking["ppo"]),
        },
        "return": {
            "definition": f"{THRESHOLD_FRACTION:.0%} of SHAC's final evaluation return (mean over seeds); "
            "an algorithm reaches it at the first evaluation where its seed-mean return is at least that",
            "shac_final_return": shac_final,
            "value": value,
            "shac": by_return["shac"],
            "ppo": by_return["ppo"],
            **_ratios(by_return["shac"], by_return["ppo"]),
        },
    }
    headline = thresholds["walking"]
    result = {
        "budget": budget,
        "seeds": seeds,
        "ppo_config": ppo_config,
        "eval_interval_env_steps": curves["shac"]["env_steps"][0],
        "evaluation": "deterministic policy on the fixed command grid (measure.grid.EVAL_COMMANDS), no pushes or "
        f"randomization, {budget['eval_seconds']:g} s per command; return = reward summed until a fall, "
        "mean over commands",
        "threshold_kind": "walking",
        "ppo_reached_threshold": headline["ppo"]["reached_threshold"],
        "env_steps_ratio_ppo_over_shac": headline["env_steps_ratio_ppo_over_shac"],
        "wall_ratio_ppo_over_shac": headline["wall_ratio_ppo_over_shac"],
        "thresholds": thresholds,
        "shac": totals["shac"],
        "ppo": totals["ppo"],
        "curves": curves,
    }
    if "env_steps_ratio_lower_bound" in headline:
        result["env_steps_ratio_lower_bound"] = headline["env_steps_ratio_lower_bound"]
    return result


def _shac_settings(r: dict) -> str:
    shac = r.get("shac_config")
    if shac is None:  # a comparison saved before SHAC's settings were recorded
        return f"{r['budget']['num_envs']} environments"
    return f"{shac['num_envs']} environments x {shac['horizon']} steps, {shac['iterations']} iterations"


def markdown(r: dict) -> str:
    fmt = lambda x, spec: "not reached" if x is None else format(x, spec)  # noqa: E731
    ppo = r["ppo_config"]
    lines = [
        "# SHAC vs PPO: sample efficiency",
        "",
        f"{r['seeds']} seed(s) each, evaluation every {r['eval_interval_env_steps']:,} environment steps: "
        f"{r['evaluation']}. SHAC: {_shac_settings(r)}. PPO: Brax's PPO with "
        f"{ppo['num_envs']} environments x {ppo['unroll_length']} steps, {ppo['num_updates_per_batch']} epochs x "
        f"{ppo['num_minibatches']} minibatches, learning rate {ppo['learning_rate']:g}"
        f"{' (adaptive KL)' if ppo['adaptive_kl'] else ''}, entropy {ppo['entropy_cost']:g}.",
        "",
        "| algorithm | env steps run | env steps/s (after the first evaluation) | final return "
        "| final lin err (m/s) | final yaw err (rad/s) | final fall rate |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for algo in ALGORITHMS:
        a, f = r[algo], r[algo]["final"]
        lines.append(
            f"| {algo.upper()} | {a['total_env_steps']:,} | {fmt(a['env_steps_per_s'], '.0f')} "
            f"| {f['episode_return']:.3f} | {f['lin_vel_error']:.3f} | {f['yaw_rate_error']:.3f} | {f['fall_rate']:.2f} |"
        )
    for kind, t in r["thresholds"].items():
        lines += ["", f"## Threshold: {kind}", "", t["definition"] + ".", ""]
        lines += ["| algorithm | env steps to threshold | train wall-clock to threshold (s) | per seed (env steps) |"]
        lines += ["|---|---:|---:|---|"]
        for algo in ALGORITHMS:
            a = t[algo]
            per_seed = ", ".join(fmt(x, ",") for x in a["per_seed_env_steps"])
            lines.append(
                f"| {algo.upper()} | {fmt(a['env_steps'], ',.0f')} | {fmt(a['train_wall_s'], '.0f')} | {per_seed} |"
            )
        lines.append("")
        if t["env_steps_ratio_ppo_over_shac"] is not None:
            lines.append(
                f"PPO / SHAC: **{t['env_steps_ratio_ppo_over_shac']:.1f}x** the environment steps, "
                f"**{t['wall_ratio_ppo_over_shac']:.1f}x** the training wall-clock."
            )
        elif "env_steps_ratio_lower_bound" in t:
            lines.append(
                f"PPO did not reach the threshold on every seed ({t['ppo'].get('seeds_reached', 0)} of {r['seeds']}) "
                f"within {t['ppo']['total_env_steps']:,} steps, so it needs more than "
                f"{t['env_steps_ratio_lower_bound']:.1f}x SHAC's environment steps."
            )
        else:
            lines.append("SHAC did not reach the threshold, so there is no ratio.")
    if len(r["ppo_variants"]) > 1:
        lines += ["", "## PPO settings", "", f"The ratios above use `{r['ppo_variant']}`, the settings that walk in the "
                  "fewest environment steps on every seed. Changes from legged_gym's settings, and each one's ratios:", "",
                  "| PPO settings | changes | env steps to walking (per seed) | PPO / SHAC steps, walking "
                  "| env steps to 90 % return | PPO / SHAC steps, return |", "|---|---|---|---:|---:|---:|"]  # fmt: skip
        envs = r["budget"]["num_envs"]
        legged_gym = asdict(PPOConfig() if envs is None else PPOConfig(num_envs=envs))
        for variant, v in r["ppo_variants"].items():
            walking, by_return = v["walking"], v["return"]
            per_seed = ", ".join(fmt(x, ",") for x in v["walking"]["ppo_per_seed_env_steps"])
            changes = ", ".join(
                f"{k} {x}" for k, x in v["ppo_config"].items() if x != legged_gym[k] and k != "iterations"
            )
            changes = changes or "none"
            lines.append(
                f"| {variant} | {changes} | {per_seed} | {fmt(walking['env_steps_ratio_ppo_over_shac'], '.1f')} "
                f"| {fmt(by_return['ppo_env_steps'], ',.0f')} | {fmt(by_return['env_steps_ratio_ppo_over_shac'], '.1f')} |"
            )
    return "\n".join(lines) + "\n"


def plot(path: Path, curves: dict[str, dict], threshold: float) -> None:
    plt = plotting.pyplot()

    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), sharey="row")
    rows = (("episode_return", "evaluation return"), ("lin_vel_error", "linear-velocity error (m/s)"))
    for col, (x_key, scale, x_label) in enumerate(
        (("env_steps", 1.0, "environment steps"), ("train_wall_s", 60.0, "training wall-clock (min)"))
    ):
        for row, (metric, y_label) in enumerate(rows):
            ax = axes[row, col]
            for i, (algo, c) in enumerate(curves.items()):
                x = np.asarray(c[x_key]) / scale
                ax.plot(
                    x, c[f"{metric}_mean"], "o-", ms=3, color=f"C{i}", label=f"{algo.upper().replace('-', ' ')} (mean)"
                )
                ax.fill_between(x, c[f"{metric}_min"], c[f"{metric}_max"], color=f"C{i}", alpha=0.2)
            if metric == "episode_return":
                ax.axhline(threshold, color="k", ls="--", lw=1, label="threshold")
            ax.set_xlabel(x_label)
            ax.set_ylabel(y_label)
            ax.grid(alpha=0.3)
    axes[0, 0].legend()
    fig.suptitle("SHAC vs PPO on the same task: seed mean, band = min..max over seeds")
    plotting.save(fig, path, dpi=100)
