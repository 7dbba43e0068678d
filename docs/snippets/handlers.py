from collections import Counter

from engine import Task


def run(task: Task) -> object:
    """One handler for the three tasks: it looks at the task's name."""
    if task.name == "split":
        return task.input["text"].lower().split()
    if task.name == "count":
        return Counter(task.parents["split"]).most_common(3)
    return f"top words: {task.parents['count']}"
