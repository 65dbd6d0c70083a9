"""realmem: surprise-gated, on-demand long-term memory for the Pi coding agent."""

__version__ = "0.1.0"
