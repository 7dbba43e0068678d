"""The vocabulary every layer speaks, with no I/O: states and records (model), trigger
rules, the Task a handler receives, outcomes, durations, how each state looks."""
