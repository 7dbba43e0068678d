"""What the engine's scripts cost Redis per task, counted in CPU instructions.

Starts a private redis-server under valgrind's callgrind (instruction counts do not drift
with the machine's other load, as times do), pushes ``--workflows`` workflows of a shape,
then claims and completes their tasks in this process, wave by wave (the roots, then what
they released, ...), and prints the instructions Redis spent per task in each wave, with
the commands and C functions that took the most. Compare two builds by running it in each:

    python scripts/script_cost.py --workflows 500 --shape fan10
    python scripts/script_cost.py --workflows 500 --shape fan10 --top 15
    python scripts/script_cost.py --workflows 500 --shape fan10 --busy
    python scripts/script_cost.py --workflows 500 --shape fan10 --apart

Needs valgrind (Debian's package). A claim takes ``--batch`` tasks at a time, as an agent
with that many free slots does.

With ``--busy`` the same Redis also holds workflows that use every feature (trigger
rules, a map, timeouts, a deadline, waits and signals, concurrency gates, rate limits,
``when`` conditions, child runs, a schedule, a start later, idempotency keys), partly run
by another agent and left running, suspended, queued, throttled and scheduled, their tasks
of other types than the measured shape's (a line says what they are). The counts are still
the measured shape's tasks alone: compared with a run without ``--busy`` they say whether
a feature costs anything to the workflows that do not use it.

With ``--apart`` each workflow is pushed alone, a few ms after the last, as independent
clients push them: records are kept as times after their run's creation, so runs pushed
together (push_many) hold many equal records, which claims and completions work out once
per call; apart, only a run's own tasks share theirs.
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
from engine import Engine, Task, Workflow  # noqa: E402
from engine.runtime.wait_keeper import WaitKeeper  # noqa: E402
from engine.schedules import parse_schedule  # noqa: E402
from engine.spec.conditions import gate  # noqa: E402

BUSY_TYPES = ["busy", "busy-rl", "busy-rl2", "busy-rl3"]  # the busy set's own task types
BUSY_CHILD = """
name: busy-child
tasks:
  - {name: lookup, type: busy}
  - {name: score, type: busy, after: [lookup]}
"""


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


def _busy_workflows() -> dict[str, Workflow]:
    """Workflows using every feature, none of their tasks of type "" (the shapes'). Their
    times are an hour: no retry, timer, deadline or token comes due while the measured
    claims run (they would promote it: work for the busy set, not a cost of the plain)."""
    rules = Workflow(
        "busy-rules", deadline=3600, retry_backoff=3600, concurrency={"key": "scope", "limit": 3},
        rate_limits={"busy-rl2": {"key": "input.customer", "limit": 1, "per": "1h"}},
    )  # fmt: skip
    build = rules.task("build", type="busy")
    deploy = rules.task("deploy", type="busy", after=[build], timeout=3600, max_attempts=2)
    announce = rules.task("announce", type="busy", after=[deploy])
    rules.task("rollback", type="busy", on_failure=[deploy])
    check = rules.task("check", type="busy", after=[build], when='input.env == "prod"')
    rules.task("either", type="busy", after=[announce, check], trigger="one_success")
    rules.task("all-done", type="busy", after=[announce, check], trigger="all_done")
    rules.task(
        "limited", type="busy-rl", after=[build],
        rate_limit={"key": "input.customer", "limit": 1, "per": "1h", "burst": 1},
    )  # fmt: skip
    rules.task("limited2", type="busy-rl2", after=[build])
    rules.task("report", type="busy", finally_=True)

    fan = Workflow("busy-map")
    split = fan.task("split", type="busy")
    count = fan.task("count", type="busy", map=split, concurrency=5, tolerate="50%")
    fan.task("total", type="busy", after=[count])

    waits = Workflow("busy-wait")
    build = waits.task("build", type="busy")
    approve = waits.task("approve", after=[build], wait={"signal": "approve", "timeout": "1d"})
    waits.task("nap", after=[build], wait={"sleep": "1h"})
    waits.task("ship", type="busy", after=[approve])
    waits.task("tell", type="busy", on_failure=[approve])
    waits.task("limited3", type="busy-rl3", after=[build])  # the deployment's rate limit

    child = Workflow("busy-parent")
    fetch = child.task("fetch", type="busy")
    run = child.task("enrich", after=[fetch], run={"template": "busy-child",
                                                    "input": {"id": "$input.id"}})  # fmt: skip
    child.task("ship", type="busy", after=[run])
    return {"rules": rules, "map": fan, "wait": waits, "child": child}


def _busy_outcome(t: Task) -> tuple[str, str]:
    """How the busy agent ends a task: conditions decided, some deploys failing."""
    decided = gate(t)
    if decided is not None:
        return decided
    if t.name == "deploy" and (t.input or {}).get("fail"):
        return "err", '"deploy broke"'
    if t.name == "split":
        return "ok", json.dumps(list(range(12)))
    if t.item is not None and t.item % 4 == 3:
        return "err", '"item broke"'
    return "ok", '"o"'


def _busy(engine: Engine, runs: int) -> str:
    """Fill the Redis with ``runs`` workflows of each feature set, left in every state:
    rounds of claims and completions by another agent (its last claims not reported),
    waits reached, signals sent and kept, child runs started, runs behind a gate,
    throttled, scheduled for later; then more runs pushed, their roots queued. What the
    Redis then holds, as a line."""
    before = engine.stats()  # the measured workflows'
    engine.put_template(BUSY_CHILD)
    engine.put_rate_limit("busy-rl3", key="input.customer", limit=1, per="1h")
    engine.put_schedule(parse_schedule({"name": "busy-hourly", "template": "busy-child",
                                        "every": "1h"}))  # fmt: skip
    engine.trigger_schedule("busy-hourly")
    wfs = _busy_workflows()

    def push(k0: int) -> dict[str, list[str]]:
        wids: dict[str, list[str]] = {kind: [] for kind in wfs}
        for k in range(k0, k0 + runs):
            given = {"scope": f"s{k % 4}", "env": "prod" if k % 2 else "qa",
                     "customer": f"c{k % 5}", "fail": k % 3 == 0, "id": k}  # fmt: skip
            for kind, wf in wfs.items():
                key = f"busy-{kind}-{k}" if k % 2 else None
                wids[kind].append(engine.push(wf, given, key=key))
        return wids

    waiting = push(0)["wait"]
    engine.push(wfs["rules"], {"scope": "later", "customer": "c0"}, start_in=3600)
    store, shard, agent = engine.store, engine.keys.shard(0), "busy-agent"
    store.calls.register(shard, agent, "{}", 3_600_000)
    keeper = WaitKeeper(engine)
    held = 0
    for rnd in range(4):
        keeper.step()
        for n, wid in enumerate(waiting):  # kept before its wait is reached, or delivered
            if n % 3 == rnd + 1:
                engine.signal(wid, "approve", {"ok": True}, reject=n % 2 == 0)
        tasks = store.scripts.run(store.calls.claim_call(shard, agent, BUSY_TYPES, 64))
        if rnd == 3:
            held = len(tasks)  # claimed, never reported: running on the busy agent
            break
        outcomes = [(t.workflow_id, _key(t), t.attempt, *_busy_outcome(t)) for t in tasks]
        if outcomes:
            reply = store.scripts.run(store.calls.complete_call(shard, agent, outcomes))
            for wid, c in reply.expand:
                store.calls.expand(wid, c)
    push(runs)
    st = engine.stats()

    def added(now: dict[str, int], was: dict[str, int]) -> str:
        return ", ".join(
            f"{n - was.get(s, 0)} {s}" for s, n in sorted(now.items()) if n > was.get(s, 0)
        )

    states, tasks = added(st.workflows, before.workflows), added(st.tasks, before.tasks)
    queued = added(st.queued, before.queued).replace(" ", " of type ")
    return (
        f"busy: {sum(st.workflows.values()) - sum(before.workflows.values())} more workflows "
        f"({', '.join(wf.name for wf in wfs.values())}, their child "
        "runs, a schedule's run, one to start later) with trigger rules, a map, timeouts, "
        "a deadline, waits and signals, concurrency gates, rate limits, when conditions, "
        f"idempotency keys: {states}; tasks {tasks} ({held} running on {agent}); "
        f"queued {queued}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workflows", "-w", type=int, default=500)
    ap.add_argument("--shape", default="fan10", choices=["fan10", "chain9", "diamond4", "map"])
    ap.add_argument("--items", type=int, default=20000, help="items of --shape map's one map")
    ap.add_argument("--batch", type=int, default=256, help="tasks per claim (default 256)")
    ap.add_argument("--top", type=int, default=0, help="show the N costliest functions")
    ap.add_argument(
        "--busy",
        action="store_true",
        help="the Redis also holds workflows using every feature, of other task types",
    )
    ap.add_argument("--busy-runs", type=int, default=24, help="--busy's runs of each kind")
    ap.add_argument(
        "--apart",
        action="store_true",
        help="push each workflow alone, a few ms after the last: no two runs share a "
        "creation time (push_many's runs do, and so do many of their tasks' records)",
    )
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
        pid, busy = str(server.pid), ""
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
                    if args.apart:
                        for _ in range(min(1000, args.workflows - k)):
                            engine.push(wf)
                            time.sleep(0.002)
                    else:
                        engine.push_many([wf] * min(1000, args.workflows - k))
            # after the measured workflows: they get the ids they get without --busy (an id's
            # digits change what Redis spends on it: the state indexes order equal scores
            # by id)
            busy = _busy(engine, args.busy_runs) if args.busy else ""
            store, shard, agent = engine.store, engine.keys.shard(0), "cost-agent"
            store.calls.register(shard, agent, "{}", 600_000)
            # a fresh Lua state holding only the scripts: what ran before (--busy's calls)
            # leaves no garbage for the measured calls to collect
            client.script_flush()
            store.scripts.load_all()
            subprocess.run(["callgrind_control", "-z", pid], capture_output=True, check=True)
            waves: list[tuple[str, int]] = []
            while True:
                tasks = []
                while got := store.scripts.run(
                    store.calls.claim_call(shard, agent, [""], args.batch)
                ):
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
                    reply = store.scripts.run(store.calls.complete_call(shard, agent, outcomes))
                    for wid, c in reply.expand:
                        store.calls.expand(wid, c)
                subprocess.run(["callgrind_control", "-d", f"complete{wave}", pid], check=True,
                               capture_output=True)  # fmt: skip
                waves.append((f"complete, wave {wave}", len(tasks)))
        finally:
            server.terminate()
            server.wait()
        if busy:
            print(busy)
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
