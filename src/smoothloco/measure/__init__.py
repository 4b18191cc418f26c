"""Measure: every number taken from a trajectory of the task, below training (which evaluates
with them): ``metrics``, ``record`` (a simulator step as a trajectory sample), ``grid`` (the
command-grid evaluation), ``scenarios`` (the standard scripted scenarios) and ``mujoco_terrain``
(our terrains as MuJoCo geoms)."""
