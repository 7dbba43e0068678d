"""Field names of a workflow hash, a definition hash and a map's hash.

Declared here only: the Lua says each by the same name (``F_LEFT``; ``i .. T_OUTPUT``, a
task's suffix; ``di .. D_NAME``, a definition's), written as its value when a script is
built (``'left'``, :func:`engine.store.scripts.with_fields`). Key names are
:mod:`engine.store.keys` (Lua: ``lua/lib/keys.lua``).
"""

from __future__ import annotations

import json

_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
# what users give (inputs) must be JSON any reader takes: no NaN or Infinity
_encode_strict = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


# -- workflow hash (P:w:<wid>) ------------------------------------------------------------
# Meta fields: name (absent: its definition's, D_RUN_NAME), state, definition digest, task
# count, tasks not terminal (absent: 0, as a finished run keeps it), succeeded, failed,
# skipped, created (epoch ms), finished (ms after created: a few bytes, where epoch ms
# take ten); upstream_failed (written from the first one). A run finished by an earlier
# release has its finish in epoch ms, in `ft`.
F_NAME, F_STATE, F_DIGEST, F_COUNT = "name", "st", "d", "n"
F_LEFT, F_OK, F_BAD, F_SKIP, F_CREATED, F_FINISHED = "left", "ok", "bad", "skip", "ct", "fd"
F_FINISHED_EPOCH = "ft"
F_UPSTREAM = "uf"
F_INPUT = "in"  # the workflow's input JSON, when it was given one (see input_layout)
# Which of the fields its end reads it has (workflow_ended in lib/ends.lua), one letter
# each: g gates, s schedule, t retention (tl), p parent run, m template, b signals kept
# in mailboxes (signal.lua sets it when it keeps one); "" for none, the
# most runs: an absent field costs a scan of the whole hash, and a plain run's end then
# reads none. Absent in a run of an earlier release (its end reads them all).
F_AT_END = "e"
# An input longer than one compact hash value is kept in pieces (`in` holds "#<pieces>"
# and the first, fields in2, in3... the others) or, longer still, in a key of its own
# (`in` is INPUT_OWN_KEY). An earlier release's run has `in` "#<pieces>" alone, and every
# piece in fields in1, in2...
INPUT_VALUE = 64  # bytes: Redis's default hash-max-listpack-value (an input up to it is `in`)
INPUT_PIECE = 63  # bytes: the longest value a listpack keeps behind a one-byte header
INPUT_PIECES_MAX = 4
INPUT_OWN_KEY = "#"
LISTPACK_ENTRIES = 128  # Redis's default hash-max-listpack-entries
F_START_AT = "at"  # a scheduled workflow's start, epoch ms (P:scheduled holds it too)
F_DEADLINE = "dl"  # its deadline, ms after its start (P:deadlines holds the time)
F_DUE = "due"  # ... that time, epoch ms, once it started
F_REASON = "why"  # why it ended so, when the state alone does not say ("deadline")
F_TTL = "tl"  # ms it is kept once finished, when not the deployment's retention (-1: never)
F_TEMPLATE, F_TEMPLATE_VERSION = "tp", "tv"  # the template (and version) it runs
F_IDEM_KEY = "ik"  # its idempotency key (P:ik:<key> names it while it exists)
F_GATES = "g"  # JSON [[gate, limit], ...]: the concurrency slots it runs in
F_LOG_BYTES = "lb"  # bytes of its task logs kept (P:w:<wid>:log), for the log budget
F_SCHEDULE, F_TICK = "sn", "tk"  # the schedule that started it, and the tick (ms)
# A child run's parent task, "<wid>:<task index>:<attempt>", and how deep it nests (1: a
# child of a run that is no one's child; engine/runtime/child_runs.py); the run at the top of its
# tree (whose P:w:<wid>:dc counts the tree's child runs)
F_PARENT, F_DEPTH, F_ROOT = "pa", "dp", "rt"
F_RATE_KEYS = "rk"  # JSON {task index: rate key} of its tasks keyed by an input field
SUMMARY_FIELDS = (
    F_NAME, F_STATE, F_COUNT, F_OK, F_BAD, F_SKIP, F_CREATED, F_FINISHED, F_UPSTREAM,
    F_FINISHED_EPOCH,
)  # fmt: skip
# Per task i: the record is the field named by the bare index; then these suffixes.
# `<i>w` counts its parents' ends: s + RULE_BASE * k + RULE_BASE**2 * f (succeeded,
# skipped, failed or upstream_failed so far); absent 0. A task with the default rule
# and one parent has none; with the default rule, f is never counted (its first failed
# parent decides it).
T_FAILURES, T_LOST, T_OUTPUT, T_ERROR, T_PARENTS_OK = "f", "l", "o", "e", "w"
T_WHY = "v"  # why a task was skipped by its condition or its handler (engine.spec.conditions)
RULE_BASE = 1 << 17  # above the most parents a task may have (definition.MAX_PARENTS)

# -- definition hash (P:d:<digest>) -------------------------------------------------------
# Whole-definition fields: users, retry backoff base ms, longest retry delay ms; the
# tasks that handle failures (rules one_failed, all_failed) and the finally tasks, as
# index csvs (absent: none; read only when a workflow with failures ends).
D_USERS, D_BACKOFF, D_BACKOFF_MAX = "r", "bk", "bm"
# Set once some run of the definition keeps payloads of its own: a task's payload is its
# definition's field i P unless the run's hash has a field of that name (push.lua writes
# one for each payload that differs from the stored one); a claim reads the run's only then.
D_OWN_PAYLOADS = "pp"
# The name of its runs that have no name field of their own: the first run's, set when it
# is stored (push.lua); a run named otherwise keeps its own. The same field name as the
# run's, so a run's hash over its definition's reads as the run's name. Absent in a
# definition of an earlier release, whose runs all keep theirs.
D_RUN_NAME = "name"
D_HANDLERS, D_FINALLY = "hf", "fy"
# Per task i, suffixes: name, type, payload JSON, priority, max attempts, children csv,
# parents csv, parents' names JSON, how many parents (when more than one; "<n>m" for a
# map, "<n>r" for a task with a rule other than all_success), that rule (absent:
# all_success, and then W has no "r": the default rule reads no field more).
D_NAME, D_TYPE, D_PAYLOAD, D_PRIORITY, D_ATTEMPTS = "N", "T", "P", "R", "M"
D_CHILDREN, D_PARENTS, D_PARENT_NAMES, D_WAIT_FOR, D_RULE = "C", "U", "V", "W", "G"
D_TIMEOUT = "Y"  # an attempt's timeout, ms (absent: none)
D_DELAY = "H"  # how long it waits once it could run, ms (absent: none)
D_WHEN = "F"  # its condition, a CEL expression (engine.spec.conditions; absent: none)
# Its rate limit (engine/spec/rate_limits.py, encode_spec): "<interval us>|<burst>|<key>", the key
# "=<constant>" or "@" (the run's own, in its field F_RATE_KEYS). Absent: none.
D_RATE = "L"
# A map's (engine.spec.mapping): "<parent index>|<key>", window, on_empty, tolerate, max items.
D_MAP, D_WINDOW, D_ON_EMPTY, D_TOLERATE, D_MAX_ITEMS = "m", "X", "E", "O", "I"
# A map with the steps manager's gather (MapSpec.gather): its list key (absent: the native list).
D_GATHER = "J"
# A map whose items run several steps: how many, the first steps (csv), the last steps
# (csv); each step s of map c has its own task fields (N, T, P, R, M, C, U, V, W) named
# with the prefix step_prefix(c, s), "s<c>.<s>" (parents and children: step numbers).
D_STEPS, D_FIRST_STEPS, D_LAST_STEPS = "S", "Q", "Z"
# Parents whose errors a task's claim returns (csv): a gather's maps that tolerate failed
# items ("<p>m"), the parents of a failure branch (one_failed, all_failed).
D_GATHERS = "K"
# A map's runtime fields in the workflow hash: elements stored, items in all (once
# expanded), started, in flight, succeeded, failed, cancelled.
M_STORED, M_TOTAL, M_STARTED, M_FLYING, M_OK, M_BAD, M_CANCELLED = "h", "n", "x", "y", "k", "z", "c"
# ... and, once it succeeded with failed items tolerated, their errors by index (JSON).
M_ERRORS = "q"
# ... and for a map with the steps manager's gather, what its items are given as their parent's
# output: the map's parent's output less the list (written by expand.lua).
M_GIVEN = "j"
# An item k's fields in its map's hash (P:w:<wid>:m:<c>): its record is the field named k;
# output, error, failures and leases lost take the task suffixes; then its element JSON.
# A step s of item k: the same fields, named "k.s" (step_field); the item's sinks
# succeeded so far (I_STEPS_DONE) when it has several.
I_ELEMENT, I_STEPS_DONE = "p", "d"


def step_prefix(c: int | str, s: int | str) -> str:
    """The definition fields' prefix of step ``s`` of map ``c`` (``step_def`` in Lua)."""
    return f"s{c}.{s}"


def step_field(k: int | str, s: int | str) -> str:
    """The record field of step ``s`` of item ``k`` in its map's hash."""
    return f"{k}.{s}"


# A wait task's (engine/spec/wait_tasks.py): what it waits for, JSON (WaitSpec.encoded); and the
# whole definition's signal names: field "A" a JSON list, "A:<name>" the csv of the wait
# tasks waiting for that signal. In the workflow hash, the signal or timer that ended a
# wait task (JSON: name, id, by, at, comment, rejected, timed_out).
D_WAIT, D_SIGNALS, D_SIGNAL_WAITERS = "A", "A", "A:"
T_SIGNAL = "a"
T_CHILD = "u"  # a run: task's child run (its id), once started


# Per-task fields status() reads, definition's first.
TASK_FIELDS = (
    D_NAME, D_TYPE, D_PAYLOAD, D_PRIORITY, D_ATTEMPTS, D_CHILDREN, D_PARENTS, D_RULE,
    D_TIMEOUT, D_DELAY, T_FAILURES, T_OUTPUT, T_ERROR, D_WAIT, T_SIGNAL, T_CHILD,
)  # fmt: skip


def field(index: int, suffix: str = "") -> str:
    """The field of task ``index`` (its record without a suffix)."""
    return f"{index}{suffix}"
