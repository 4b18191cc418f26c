"""smoothloco: legged locomotion learned through analytically smoothed hard contact."""

__version__ = "0.1.0"
