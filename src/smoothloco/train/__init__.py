"""Train: the agents (``shac``, ``ppo``, ``networks``), runs as data (``runs``: configuration and
loading; ``checkpoint``; ``run_folder``), the training loop (``runner``), the SHAC-PPO
comparison (``compare``) and ``smoothloco train`` (``cli``), each importing only what is below it."""
