"""What runs against a deployment: the agent, handlers, the wait keeper, child runs,
signals, task logs, rollups, live events, retries, waiting for a run to end, history."""
