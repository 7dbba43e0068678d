"""The console's data layer: engine reads and events turned into what screens show.

Nothing here imports Textual, so all of it is testable without an app.
"""

from __future__ import annotations

import re

# a workflow id as a link names it (--open ID, a served page's ?workflow=ID): a whole number
WORKFLOW_ID = re.compile(r"[0-9]{1,20}")
