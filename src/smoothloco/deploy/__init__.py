"""Deploy layer: the controller's ONNX export with its contract (``export``), watching a run's
policy (``play``), offscreen video (``render``) and ``smoothloco export / play`` (``cli``). What
runs beside an export without JAX is ``smoothloco.robot_side``."""
