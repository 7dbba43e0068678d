"""The console's screens, one per module (modal dialogs included)."""
