"""The contact study's report: the claims table over seeds, ``study.md`` and its two figures,
from the runs and gradient measurements that ``study.run_contact_study`` gathered."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from smoothloco import plotting
from smoothloco.measure.metrics import nanmean


def _stats(values) -> dict[str, float]:
    values = np.asarray(list(values), float)
    finite = values[np.isfinite(values)]
    return {"mean": nanmean(values), "std": float(finite.std()) if finite.size else float("nan"), "n": int(finite.size)}


# (column, where in a run row: "" for the training, "own" for the policy's own simulator, metric,
# header in study.md, scale there): the table of the claims.
TABLE_COLUMNS: tuple[tuple[str, str, str, str, float], ...] = (
    ("train_return", "", "train_return", "training return", 1.0),
    ("lin_vel_error_own", "own", "lin_vel_error", "lin. err. own sim", 1.0),
    ("lin_vel_error_hard", "hard", "lin_vel_error", "lin. err. hard", 1.0),
    ("lin_vel_error_mujoco", "mujoco", "lin_vel_error", "lin. err. MuJoCo", 1.0),
    ("yaw_rate_error_mujoco", "mujoco", "yaw_rate_error", "yaw err. MuJoCo", 1.0),
    ("fall_rate_hard", "hard", "fall_rate", "falls hard", 1.0),
    ("fall_rate_mujoco", "mujoco", "fall_rate", "falls MuJoCo", 1.0),
    ("push_survival_hard", "hard", "push_survival", "push survival hard", 1.0),
    ("push_survival_mujoco", "mujoco", "push_survival", "push survival MuJoCo", 1.0),
    ("foot_slip_own", "own", "foot_slip", "foot slip own sim", 1.0),
    ("foot_slip_mujoco", "mujoco", "foot_slip", "foot slip MuJoCo", 1.0),
    ("penetration_own", "own", "mean_penetration", "penetration own sim (mm)", 1000.0),
    ("penetration_mujoco", "mujoco", "mean_penetration", "penetration MuJoCo (mm)", 1000.0),
    ("cost_of_transport_own", "own", "cost_of_transport", "cost of transport own sim", 1.0),
    ("cost_of_transport_mujoco", "mujoco", "cost_of_transport", "cost of transport MuJoCo", 1.0),
)
CONTACT_COLUMNS = 9  # the columns from here on describe the gait's contact, not learning and transfer


def _value(run: dict, where: str, metric: str) -> float:
    return run[where][metric] if where else run[metric]


def study_table(runs: list[dict], models: Sequence[str]) -> dict[str, dict[str, dict[str, float]]]:
    """Mean, std and count over seeds of every column, per contact model."""
    return {
        m: {
            col: _stats(_value(r, where, metric) for r in runs if r["model"] == m)
            for col, where, metric, *_ in TABLE_COLUMNS
        }
        for m in models
    }


def claims(runs: list[dict], soft_arms: Sequence[str]) -> dict[str, float]:
    """The study's numbers: how much the policies of each soft arm (named in ``soft_arms``) lose
    in MuJoCo, how much smooth-trained ones lose there, and how far hard-trained ones stay behind
    smooth-trained ones."""

    def mean(model: str, where: str, metric: str) -> float:
        return nanmean(_value(r, where, metric) for r in runs if r["model"] == model)

    out = {}
    for name in [*soft_arms, "smooth"]:
        out[f"{name}_mujoco_lin_vel_error_increase"] = mean(name, "mujoco", "lin_vel_error") - mean(
            name, "own", "lin_vel_error"
        )
        out[f"{name}_mujoco_fall_rate_increase"] = mean(name, "mujoco", "fall_rate") - mean(name, "own", "fall_rate")
    out["hard_learning_gap_return"] = mean("smooth", "", "train_return") - mean("hard", "", "train_return")
    out["hard_learning_gap_lin_vel_error"] = mean("hard", "own", "lin_vel_error") - mean(
        "smooth", "own", "lin_vel_error"
    )
    return out


def claim_text(key: str) -> str:
    """A claim's line in study.md."""
    if key.startswith("hard_learning_gap"):
        what = "training return" if key.endswith("return") else "own-sim tracking error (m/s)"
        first, second = ("smooth", "hard") if key.endswith("return") else ("hard", "smooth")
        return f"learning gap: {first}-trained minus {second}-trained {what}"
    arm, measure = key.split("_mujoco_")
    what = "tracking error (m/s)" if measure.startswith("lin_vel") else "fall rate"
    return f"{arm}-trained: MuJoCo minus own-sim {what}"


def _fmt(s: dict[str, float], scale: float = 1.0, fmt: str = ".3f") -> str:
    if not np.isfinite(s["mean"]):
        return "–"
    mean, std = scale * s["mean"], scale * s["std"]
    return f"{mean:{fmt}} ± {std:{fmt}}" if s["n"] > 1 else f"{mean:{fmt}}"


def study_markdown(study: dict) -> str:
    budget = study["budget"]
    lines = [
        "# Contact-model study",
        "",
        f"SHAC overrides {budget['shac'] or 'none (defaults)'}, {budget['seeds']} seeds per arm; mean ± std over "
        "seeds. Errors in m/s and rad/s on the standard evaluation (`smoothloco eval`). Arms: "
        + "; ".join(f"{name} ({_settings(task)})" for name, task in study["task_overrides"].items())
        + ".",
        "",
    ]
    for title, columns in (("Learning and transfer", TABLE_COLUMNS[:CONTACT_COLUMNS]),
                           ("The gait's contact: own simulator and MuJoCo", TABLE_COLUMNS[CONTACT_COLUMNS:])):  # fmt: skip
        lines += [
            f"## {title}",
            "",
            "| arm | " + " | ".join(c[3] for c in columns) + " |",
            "|---|" + "---:|" * len(columns),
        ]
        for model, cols in study["table"].items():
            lines.append(f"| {model} | " + " | ".join(_fmt(cols[c], scale) for c, *_, scale in columns) + " |")
        lines.append("")
    lines += ["| claim | value |", "|---|---:|"]
    lines += [f"| {claim_text(k)} | {v:+.3f} |" for k, v in study["claims"].items()]
    lines += ["", *gradient_table(study["gradients"], "initial policy")]
    lines += ["", "![transfer](transfer.png)", "", "![gradients](gradients.png)", ""]
    return "\n".join(lines)


def _settings(task: dict) -> str:
    return ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in task.items())


def gradient_table(gradients: dict, policy: str) -> list[str]:
    """Markdown lines: gradient quality per contact model and window, with 95 % intervals."""
    lines = [f"## Gradient quality ({policy}; ± 95 % interval over batches)", ""]
    lines += [
        "| contact model | window | batch cosine | relative std | cosine with zeroth order |",
        "|---|---:|---:|---:|---:|",
    ]
    for model, g in gradients.items():
        for i, w in enumerate(g["windows"]):
            lines.append(
                f"| {model} | {w} | {g['batch_cosine'][i]:.3f}{_pm(g, 'batch_cosine_ci95', i)} | {g['relative_std'][i]:.2f} "
                f"| {g['zo_cosine'][i]:.3f}{_pm(g, 'zo_cosine_ci95', i)} |"
            )
    return lines


def _pm(gradients: dict, key: str, i: int) -> str:
    """`` ± half-width`` where the study has it (studies from before the intervals do not)."""
    return f" ± {gradients[key][i]:.3f}" if key in gradients else ""


def plot_transfer(table: dict, path: Path) -> None:
    """Tracking error in the policy's own simulator, in hard and in MuJoCo, per contact model."""
    plt = plotting.pyplot()
    columns = (("lin_vel_error_own", "own sim"), ("lin_vel_error_hard", "hard"), ("lin_vel_error_mujoco", "MuJoCo"))
    fig, ax = plt.subplots(figsize=(6, 3.5))
    x = np.arange(len(table))
    width = 0.8 / len(columns)
    for i, (col, label) in enumerate(columns):
        means = [table[m][col]["mean"] for m in table]
        stds = [np.nan_to_num(table[m][col]["std"]) for m in table]
        ax.bar(x + (i - 1) * width, means, width, yerr=stds, label=label, capsize=3)
    ax.set_xticks(x, [f"trained {m}" for m in table])
    ax.set_ylabel("linear velocity error (m/s)")
    ax.legend()
    ax.set_title("tracking error where each policy is evaluated")
    plotting.save(fig, path, dpi=100)


def plot_gradients(gradients: dict, path: Path, policy: str = "initial policy") -> None:
    """Batch cosine, relative spread and zeroth-order agreement against the window length."""
    plt = plotting.pyplot()
    panels = (
        ("batch_cosine", "cosine between batch gradients"),
        ("relative_std", "relative std of batch gradients"),
        ("zo_cosine", "cosine with zeroth-order estimate"),
    )
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.2))
    for ax, (key, label) in zip(axes, panels):
        for model, g in gradients.items():
            ax.errorbar(g["windows"], g[key], yerr=g.get(f"{key}_ci95"), fmt="o-", capsize=3, label=model)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("window (control steps)")
        ax.set_title(label, fontsize=10)
        if key == "relative_std":
            ax.set_yscale("log")
    axes[0].legend()
    fig.suptitle(f"policy-gradient quality through each contact model ({policy}; bars: 95 % intervals)")
    plotting.save(fig, path, dpi=100)


# -- command line ------------------------------------------------------------------------------
