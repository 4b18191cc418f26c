"""smoothloco: legged locomotion learned through analytically smoothed hard contact."""

from smoothloco.quiet import install_warp_probe_filter

__version__ = "0.1.0"

# Brax imports mujoco.mjx, which prints two lines about the optional `warp` package we do not
# use; see smoothloco.quiet. Installed here so that it precedes any import of Brax by ours.
install_warp_probe_filter()
