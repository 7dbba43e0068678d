"""The console's data layer: engine reads and events turned into what screens show.

Nothing here imports Textual, so all of it is testable without an app.
"""
