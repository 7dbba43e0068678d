"""What the engine's scripts cost Redis per task, counted in CPU instructions.

Starts a private redis-server under valgrind's callgrind (instruction counts do not drift
with the machine's other load, as times do), pushes ``--workflows`` workflows of a shape,
then claims and completes their tasks in this process, wave by wave (the roots, then what
they released, ...), and prints the instructions Redis spent per task in each wave, with
the commands and C functions that took the most. Compare two builds by running it in each:

    python scripts/script_cost.py --workflows 500 --shape fan10
    python scripts/script_cost.py --workflows 500 --shape fan10 --top 15

Needs valgrind (Debian's package). A claim takes ``--batch`` tasks at a time, as an agent
with that many free slots does.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis  # noqa: E402

from demos import shapes  # noqa: E402
from demos.map_bench import map_workflow  # noqa: E402
from engine import Engine  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _self_costs(path: Path) -> collections.Counter[str]:
    """Each function's own instructions in one callgrind dump (names as callgrind gives
    them: the Debian server is stripped, so Lua's own functions show as addresses)."""
    names: dict[str, str] = {}
    cost: collections.Counter[str] = collections.Counter()
    current, in_call = "?", False
    for line in path.read_text().splitlines():
        if line.startswith(("fn=", "cfn=")):
            m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line)
            if m and m.group(2):
                names[m.group(1)] = m.group(2)
            if m and line.startswith("fn="):
                current = names.get(m.group(1), "?")
        elif line.startswith("calls="):
            in_call = True
        elif line[:1].isdigit() or line[:1] in "+-*":
            if in_call:
                in_call = False
            elif len(parts := line.split()) >= 2:
                cost[current] += int(parts[1])
    return cost


def _summary(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    return 0


def _key(t: Any) -> str:
    """The task's key in an outcome: its index, "c.k" for item k of map c."""
    return str(t.index) if t.item_index is None else f"{t.index}.{t.item_index}"


def _output(t: Any, items: int) -> str:
    """What the task returns: the list a map is over for the map shape's first task."""
    return json.dumps(list(range(items))) if items and t.name == "split" else '"o"'


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workflows", "-w", type=int, default=500)
    ap.add_argument("--shape", default="fan10", choices=["fan10", "chain9", "diamond4", "map"])
    ap.add_argument("--items", type=int, default=20000, help="items of --shape map's one map")
    ap.add_argument("--batch", type=int, default=128, help="tasks per claim (default 128)")
    ap.add_argument("--top", type=int, default=0, help="show the N costliest functions")
    args = ap.parse_args()
    if not shutil.which("valgrind") or not shutil.which("callgrind_control"):
        print("script_cost: needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 2
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cg.out"
        server = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "redis-server",
             "--port", str(port), "--save", "", "--appendonly", "no", "--dir", tmp],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        pid = str(server.pid)
        try:
            client = redis.Redis(port=port)
            for _ in range(100):
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.2)
            engine = Engine.connect(f"redis://127.0.0.1:{port}/0")
            if args.shape == "map":  # one workflow: split -> an item per element -> gather
                wf = map_workflow(args.items, 1000)
                engine.push(wf)
            else:
                wf = getattr(shapes, args.shape)()
                for k in range(0, args.workflows, 1000):
                    engine.push_many([wf] * min(1000, args.workflows - k))
            store, shard, agent = engine.store, engine.keys.shard(0), "cost-agent"
            store.register(shard, agent, "{}", 600_000)
            subprocess.run(["callgrind_control", "-z", pid], capture_output=True, check=True)
            waves: list[tuple[str, int]] = []
            while True:
                tasks = []
                while got := store.scripts.run(store.claim_call(shard, agent, [""], args.batch)):
                    tasks += got
                if not tasks:
                    break
                wave = len(waves) // 2 + 1
                subprocess.run(["callgrind_control", "-d", f"claim{wave}", pid], check=True,
                               capture_output=True)  # fmt: skip
                waves.append((f"claim, wave {wave}", len(tasks)))
                for k in range(0, len(tasks), args.batch):
                    outcomes = [
                        (
                            t.workflow_id,
                            _key(t),
                            t.attempt,
                            "ok",
                            _output(t, args.items if args.shape == "map" else 0),
                        )
                        for t in tasks[k : k + args.batch]
                    ]
                    reply = store.scripts.run(store.complete_call(shard, agent, outcomes))
                    for wid, c in reply.expand:
                        store.expand(wid, c)
                subprocess.run(["callgrind_control", "-d", f"complete{wave}", pid], check=True,
                               capture_output=True)  # fmt: skip
                waves.append((f"complete, wave {wave}", len(tasks)))
        finally:
            server.terminate()
            server.wait()
        dumps = sorted(Path(tmp).glob("cg.out.*"), key=lambda p: int(p.suffix[1:]))
        total_instr = total_tasks = 0
        for (label, n), dump in zip(waves, dumps, strict=False):
            instr = _summary(dump)
            total_instr += instr
            total_tasks += n if label.startswith("claim") else 0
            print(f"{label:20s} {n:7d} tasks {instr / n:10,.0f} instructions/task")
            if args.top:
                costs = _self_costs(dump)
                for name, c in costs.most_common(args.top):
                    print(f"    {c / n:9,.0f}  {name}")
        print(f"{'all':20s} {total_tasks:7d} tasks {total_instr / total_tasks:10,.0f} "
              "instructions/task (claims and completions)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
