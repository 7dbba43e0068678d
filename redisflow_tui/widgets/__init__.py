"""The console's widgets, one per module."""
