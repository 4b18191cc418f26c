"""Train: the agents (``shac``, ``ppo``, ``networks``), runs as data (``runs``: configuration and
loading; ``checkpoint``; ``run_folder``), one training run (``runner``: its lifecycle; ``run_log``,
``evaluation``, ``compile_cache``, the host loops ``shac_loop`` and ``ppo_loop``, ``summary``), the SHAC-PPO
comparison (``compare``) and ``smoothloco train`` (``cli``), each importing only what is below it."""
