#!/usr/bin/env python3
"""An --exec worker: any program that reads the task as JSON on stdin and writes its
output on stdout works the same way, in any language.

    redisflow-agent --exec "python3 demos/upper.py"
"""

import json
import sys

task = json.load(sys.stdin)
payload = task["payload"]
if payload == "fail":
    print("asked to fail", file=sys.stderr)
    sys.exit(1)
print(json.dumps(str(payload).upper()))
