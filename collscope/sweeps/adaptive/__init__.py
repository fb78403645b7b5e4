"""collscope.sweeps.adaptive.planner."""
