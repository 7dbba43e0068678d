"""The workflow language, pure: the definition builder and its validation, the file
loader, maps, gates, wait tasks, child-run specs, rate-limit specs, conditions, schemas."""
