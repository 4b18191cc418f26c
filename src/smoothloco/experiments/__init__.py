"""Experiments above training and evaluation: SHAC against PPO (``compare``), SHAC's efficiency
frontier (``frontier``), the contact-model study (``study``), gradient quality (``gradients``) and
benchmarks (``bench``)."""
