"""History of run times: per task type (agents aggregate) and per template (workflow
ends), counted by the minute and by the hour in Redis, read back as counts and quantiles.

An agent adds each attempt's outcome and run time to counters in memory, per minute and
type (:class:`Rollups`: a fixed histogram of log-spaced buckets, :data:`BOUNDS_MS`), and
sends them every :data:`ROLLUP_S` seconds in one call (``rollup.lua``: HINCRBY into the
minute's and the hour's hashes, which expire). A template's runs are counted by
``lib/history.lua`` as they end. Nothing is added to a task's own scripts.

Reading (:func:`history`): the last hour from 60 minute hashes, the last day from 24 hour
hashes; quantiles are read off the buckets (the upper bound of the bucket holding them).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.runtime.deployment import Deployment

# Upper bounds (ms) of the duration buckets; one more bucket holds the longer ones.
# lib/history.lua's HIST_MS is the same list (tests/test_tasklogs.py checks).
BOUNDS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000,
             900000, 3600000)  # fmt: skip
ROLLUP_S = 5.0  # how often an agent sends its counters
KINDS = {"type": "y", "template": "t", "wait": "q"}  # wait: per type, time ready to claim


def bucket_of(ms: float) -> int:
    """The bucket a duration of ``ms`` falls in (``len(BOUNDS_MS)``: past the last)."""
    return bisect.bisect_left(BOUNDS_MS, ms)


_BOUNDS_S = tuple(b / 1000 for b in BOUNDS_MS)


def _bucket_counts(values: list[Any], bounds: tuple[float, ...]) -> list[int]:
    """How many of ``values`` fall in each bucket of ``bounds`` (as :func:`bucket_of`
    puts one: up to and including its bound; one more bucket past the last)."""
    ordered = sorted(values)
    upto = [bisect.bisect_right(ordered, b) for b in bounds] + [len(ordered)]
    return [upto[0]] + [upto[k] - upto[k - 1] for k in range(1, len(upto))]


class Rollups:
    """An agent's counters not sent yet: per minute, per task type. A hot path: an
    attempt's :meth:`add` (or the agent's own :meth:`sample`) only appends a sample; the
    thread that sends them (:meth:`take`) folds them into the counters.

    A sample is five values appended to one flat list, not a tuple kept: seconds of
    samples kept as tuples (a hundred thousand objects for the garbage collector to
    track) made the agent's collections cost it more per task than the samples did."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # minute -> type -> [succeeded, failed, seconds, bucket 0, bucket 1, ..., then
        # attempts waited for, seconds waited ready, wait bucket 0, 1, ...]
        self._acc: dict[int, dict[str, list[Any]]] = {}
        self._minute = -1  # the minute `_types` counts
        self._types: dict[str, list[Any]] = {}
        self._sent = time.monotonic()
        # type, succeeded, seconds, minute or -1: this batch's, ms it waited ready or -1:
        # five values a sample, flat, not folded in yet; list.extend of a tuple is atomic,
        # so adding takes no lock, and the tuple goes at once
        self._samples: list[Any] = []
        self.sample: Callable[[tuple[str, bool, float, int, int]], None] = self._samples.extend

    def _fold(self) -> None:
        """Fold the samples taken so far into the counters (one thread at a time); a
        sample without its own minute counts in the current one."""
        with self._lock:
            n = len(self._samples)  # those appended meanwhile stay for the next fold
            flat = self._samples[:n]
            del self._samples[:n]
            if not flat:
                return
            current = int(time.time()) // 60
            types, oks, minutes = flat[0::5], flat[1::5], flat[3::5]
            k = len(types)
            if (
                types.count(types[0]) == k
                and oks.count(oks[0]) == k
                and (minutes.count(minutes[0]) == k)
            ):  # the usual fold: one type, one outcome, one minute, counted at once
                minute = minutes[0] if minutes[0] >= 0 else current
                self._add_all(self._account(minute, types[0]), oks[0], flat[2::5], flat[4::5])
                return
            self._add_each(flat, current)

    def _account(self, minute: int, task_type: str) -> list[Any]:
        """The accumulator of ``task_type`` in ``minute`` (made at first)."""
        if minute != self._minute:
            self._minute, self._types = minute, self._acc.setdefault(minute, {})
        acc = self._types.get(task_type)
        if acc is None:
            acc = self._types[task_type] = [0, 0, 0.0] + [0] * (2 * len(BOUNDS_MS) + 4)
        return acc

    @staticmethod
    def _add_all(acc: list[Any], ok: bool, seconds: list[float], waits: list[int]) -> None:
        """Count attempts of one type, outcome and minute: their run times ``seconds``,
        and ``waits`` (ms ready before their claims; -1: not known). Sums and bucket
        counts in C (sorted, then cut at the bounds): a few tens of ns an attempt."""
        acc[0 if ok else 1] += len(seconds)
        acc[2] = sum(seconds, acc[2])  # in order, as one at a time would add them
        for b, n in enumerate(_bucket_counts(seconds, _BOUNDS_S)):
            acc[3 + b] += n
        if min(waits) < 0:
            waits = [w for w in waits if w >= 0]
        if waits:
            at = 4 + len(BOUNDS_MS)  # where an accumulator's waits start
            acc[at] += len(waits)
            acc[at + 1] = sum(waits, acc[at + 1])
            for b, n in enumerate(_bucket_counts(waits, BOUNDS_MS)):
                acc[at + 2 + b] += n

    def _add_each(self, flat: list[Any], current: int) -> None:
        """Fold samples of several types, outcomes or minutes, one at a time."""
        find, run_bounds, wait_bounds = bisect.bisect_left, _BOUNDS_S, BOUNDS_MS
        at = 4 + len(BOUNDS_MS)  # where an accumulator's waits start
        values = iter(flat)
        for task_type, ok, seconds, minute, waited in zip(
            values, values, values, values, values, strict=True
        ):
            acc = self._account(minute if minute >= 0 else current, task_type)
            acc[0 if ok else 1] += 1
            acc[2] += seconds
            acc[3 + find(run_bounds, seconds)] += 1
            if waited >= 0:
                acc[at] += 1
                acc[at + 1] += waited
                acc[at + 2 + find(wait_bounds, waited)] += 1

    def add(
        self,
        task_type: str,
        ok: bool,
        seconds: float,
        now: float | None = None,
        waited_ms: int = -1,
    ) -> None:
        """Count one attempt of ``task_type`` that ran ``seconds`` and ended at ``now``
        (epoch seconds; default: now) (``ok``: succeeded), having waited ready
        ``waited_ms`` before its claim (-1: not known)."""
        self.sample((task_type, ok, seconds, -1 if now is None else int(now) // 60, waited_ms))

    def take(self, force: bool = False) -> dict[int, dict[str, int]]:
        """The counters to send as history fields per minute (emptied), when
        :data:`ROLLUP_S` has passed or ``force``."""
        now = time.monotonic()
        if not force and now - self._sent < ROLLUP_S:
            return {}
        self._fold()
        if not self._acc:
            return {}
        with self._lock:
            acc, self._acc, self._minute, self._types = self._acc, {}, -1, {}
        self._sent = now
        out: dict[int, dict[str, int]] = {}
        for minute, types in acc.items():
            fields = out.setdefault(minute, {})
            at = 4 + len(BOUNDS_MS)  # where the waits start
            for typ, c in types.items():
                p = f"y|{typ}|"
                for name, n in (("ok", c[0]), ("bad", c[1]), ("ms", round(c[2] * 1000))):
                    if n:
                        fields[p + name] = n
                for k, n in enumerate(c[3:at]):
                    if n:
                        fields[f"{p}b{k}"] = n
                # time ready before the claim: "ok" counts the attempts, "ms" their waits
                q = f"q|{typ}|"
                for name, n in (("ok", c[at]), ("ms", c[at + 1])):
                    if n:
                        fields[q + name] = n
                for k, n in enumerate(c[at + 2 :]):
                    if n:
                        fields[f"{q}b{k}"] = n
        return out


@dataclass
class HistoryStat:
    """One task type's or template's history over a window."""

    name: str
    succeeded: int = 0
    failed: int = 0
    total_ms: int = 0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(BOUNDS_MS) + 1))
    # per hour of the day window, oldest first: runs ended (the sparkline)
    hourly: list[int] = field(default_factory=list)

    @property
    def count(self) -> int:
        return self.succeeded + self.failed

    def quantile(self, q: float) -> float | None:
        """Seconds under which ``q`` of the runs ended (a bucket's upper bound; ``None``
        for no runs, ``inf`` past the last bound)."""
        total = sum(self.buckets)
        if not total:
            return None
        rank = q * total
        seen = 0
        for k, n in enumerate(self.buckets):
            seen += n
            if seen >= rank and n:
                return BOUNDS_MS[k] / 1000 if k < len(BOUNDS_MS) else float("inf")
        return float("inf")

    @property
    def mean(self) -> float | None:
        return self.total_ms / 1000 / self.count if self.count else None

    def to_dict(self) -> dict[str, Any]:
        def num(v: float | None) -> float | None:
            return None if v is None or v == float("inf") else v

        return {
            "name": self.name,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "mean_s": num(self.mean),
            "p50_s": num(self.quantile(0.5)),
            "p90_s": num(self.quantile(0.9)),
            "p99_s": num(self.quantile(0.99)),
            "buckets": self.buckets,
        }


def _fold(buckets: list[dict[str, str]], kind: str, hourly: bool) -> dict[str, HistoryStat]:
    out: dict[str, HistoryStat] = {}
    tag = KINDS[kind]
    for b, raw in enumerate(buckets):
        for f, v in raw.items():
            k, _, rest = f.partition("|")
            if k != tag:
                continue
            name, _, stat = rest.rpartition("|")
            s = out.get(name)
            if s is None:
                s = out[name] = HistoryStat(name)
                if hourly:
                    s.hourly = [0] * len(buckets)
            n = int(v)
            if stat == "ok":
                s.succeeded += n
            elif stat == "bad":
                s.failed += n
            elif stat == "ms":
                s.total_ms += n
            elif stat.startswith("b") and stat[1:].isdigit() and int(stat[1:]) < len(s.buckets):
                s.buckets[int(stat[1:])] += n
            if hourly and stat in ("ok", "bad"):
                s.hourly[b] += n
    return out


def history(engine: Deployment, by: str = "type", now: float | None = None) -> dict[str, Any]:
    """Per task type (``by="type"``) or template: ``{"hour": {name: HistoryStat}, "day":
    {name: HistoryStat}}``, the last 60 minutes and the last 24 hours (this one included);
    a day's :class:`HistoryStat` has ``hourly`` counts, oldest first."""
    if by not in KINDS:
        raise ValueError(f"--by {by!r}: expected one of {', '.join(KINDS)}")
    t = int(engine.store.server_time() if now is None else now)
    minute, hour = t // 60, t // 3600
    last_hour = engine.store.logs.history_buckets(False, minute - 59, minute)
    last_day = engine.store.logs.history_buckets(True, hour - 23, hour)
    return {"hour": _fold(last_hour, by, False), "day": _fold(last_day, by, True)}


def metric_families(engine: Deployment) -> list[Any]:
    """/metrics' view of the history totals: ``redisflow_task_duration_seconds`` and
    ``redisflow_queue_wait_seconds`` (histograms per task type: how long attempts ran,
    and waited ready before their claim), ``redisflow_template_run_duration_seconds``
    (per template), ``redisflow_template_runs_total`` (per template and outcome) and
    ``redisflow_task_attempts_total`` (per type and outcome: succeeded, or failed whether
    retried or not)."""
    from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

    raw = {f: str(v) for f, v in engine.store.logs.history_totals().items()}
    totals, runs = _fold([raw], "type", False), _fold([raw], "template", False)
    waits = _fold([raw], "wait", False)
    queued = HistogramMetricFamily(
        "redisflow_queue_wait_seconds",
        "How long task attempts waited ready before an agent claimed them, per type.",
        labels=["type"],
    )
    tasks = HistogramMetricFamily(
        "redisflow_task_duration_seconds",
        "How long task attempts ran (their handlers), per type.",
        labels=["type"],
    )
    templates = HistogramMetricFamily(
        "redisflow_template_run_duration_seconds",
        "How long runs of each template took, from push to end.",
        labels=["template"],
    )
    counts = CounterMetricFamily(
        "redisflow_template_runs",
        "Runs of each template that ended, by outcome (succeeded, or failed or cancelled).",
        labels=["template", "outcome"],
    )
    for family, stats in ((tasks, totals), (templates, runs), (queued, waits)):
        for name, s in sorted(stats.items()):
            cumulative, seen = [], 0
            for k, n in enumerate(s.buckets):
                seen += n
                bound = f"{BOUNDS_MS[k] / 1000:g}" if k < len(BOUNDS_MS) else "+Inf"
                cumulative.append((bound, seen))
            family.add_metric([name], cumulative, s.total_ms / 1000)
    attempts = CounterMetricFamily(
        "redisflow_task_attempts",
        "Task attempts that ended, per type and outcome (succeeded, failed: retried or not).",
        labels=["type", "outcome"],
    )
    for outcomes, stats in ((counts, runs), (attempts, totals)):
        for name, s in sorted(stats.items()):
            outcomes.add_metric([name, "succeeded"], s.succeeded)
            outcomes.add_metric([name, "failed"], s.failed)
    return [tasks, queued, templates, counts, attempts]


def sparkline(values: list[int], empty: str = "·") -> str:
    """``values`` as bars ▁ to █ scaled to the largest (``empty`` for none)."""
    bars = "▁▂▃▄▅▆▇█"
    top = max(values) if values else 0
    return "".join(empty if not v else bars[min(7, (v * 8 - 1) // top)] for v in values)
