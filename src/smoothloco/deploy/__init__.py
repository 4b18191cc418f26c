"""Deploy layer: ONNX export with its contract (``export``), the standalone MuJoCo player
(``player``), offscreen video (``render``) and ``smoothloco export / play`` (``cli``).

Nothing is imported here: ``player`` must stay importable without JAX (it is the contract's
reference reader), so each module is imported by its own name.
"""
