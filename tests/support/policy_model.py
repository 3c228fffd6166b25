"""An independent reference model of the retirement rules, and random fleets to drive
the real planner through, for the planner's model-based property test.

The model is written from the rules as the policy's docstrings and
docs/operations.md state them, per physical worker (a port on loopback, read under
any of several spellings), not per label as the planner keeps them: a worker is
stopped only if on ``wait_count`` consecutive cycles it was fresh, up, supported,
finite idle >= ``max_idle``, alerting, not conflicting (its labels agreeing), and it
is not retiring, not cooling down, first seen (read up) ``min_age`` ago or more; at
most ``max_stops_per_cycle`` per group, never taking a group below ``min_workers``
workers known alive (retiring ones gone, each worker once); decided once, under its
smallest label; longest idle first. A sample older than a finding that the worker
was unreachable reads as down. A restart keeps retiring, cooldown and unreachable
marks and forgets streaks and sightings.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, replace

from wool_idle.autoscaler import floor
from wool_idle.autoscaler.policy import Plan, PolicySettings, Reading
from wool_idle.autoscaler.verdicts import StopResult, Verdict

SPELLINGS = ("127.0.0.1:{p}", "[::1]:{p}", "[::ffff:127.0.0.1]:{p}", "[0:0::1]:{p}")
"""Labels of the worker on port ``p``: all resolve to one worker (loopback)."""
UNKNOWN = ("0.0.0.0:{p}", "name-{p}")
"""Labels that take no part: an unspecified address (unresolved), not an address."""
GROUPS = (("a",), ("b",), ("",))
ALIVE = frozenset({"busy", "not_alerting", "unsupported", "idle"})


def port_of(label: str) -> int:
    return int(label.rsplit(":", 1)[-1] if ":" in label else label.rsplit("-", 1)[-1])


def known(label: str) -> bool:
    return not label.startswith(("0.0.0.0", "name"))


def verdict(r: Reading, rule: PolicySettings) -> str:
    """One label's verdict, as the ``Verdict`` docstrings state them ("idle": a candidate)."""
    fresh = 0 <= r.age <= rule.max_staleness  # NaN compares false
    if r.conflicting or not r.up:
        return "conflicting" if r.conflicting else "down"
    if not r.supported:
        return "unsupported" if fresh else "stale"
    if not (isinstance(r.idle, float) and 0 <= r.idle < math.inf):
        return "invalid"
    if not fresh:
        return "stale"
    return "busy" if r.idle < rule.max_idle else ("idle" if r.alerting else "not_alerting")


@dataclass(frozen=True)
class Seen:
    """One physical worker in one read: its labels, whether it qualifies (every label a
    candidate, in one group), is known alive, was read up at all, its group and the
    least idle value of its labels."""

    labels: list[str]
    qualifies: bool
    alive: bool
    up: bool
    group: tuple[str, ...] | None
    idle: float


@dataclass
class Model:
    """What the rules remember of each worker (by port): its streak of qualifying
    reads, when a stop of it was sent (retiring), until when it cools down, since when
    it has been read up, when it was found unreachable; and until when stops are held."""

    rule: PolicySettings
    streak: dict[int, int] = field(default_factory=dict)
    retiring: dict[int, float] = field(default_factory=dict)
    cooldown: dict[int, float] = field(default_factory=dict)
    first_seen: dict[int, float] = field(default_factory=dict)
    unreachable: dict[int, float] = field(default_factory=dict)
    held_until: float = -math.inf

    def observe(self, readings: list[Reading], now: float, read_at: float) -> dict[int, Seen]:
        """What ``readings`` show of each worker; the streaks and sightings move on."""
        by_label: dict[int, dict[str, list[Reading]]] = {}
        for r in readings:
            p = port_of(r.worker)
            found = self.unreachable.get(p)
            if found is not None:
                r = replace(r, up=r.up and not r.age >= read_at - found)
            if known(r.worker):
                by_label.setdefault(p, {}).setdefault(r.worker, []).append(r)
        staleness = self.rule.max_staleness  # a mark goes once every fresh sample is newer
        self.unreachable = {p: t for p, t in self.unreachable.items() if read_at - t <= staleness}
        view = {}
        for p, labels in by_label.items():
            verdicts = {
                "conflicting" if any(x != rs[0] for x in rs) else verdict(rs[0], self.rule)
                for rs in labels.values()
            }
            groups = {rs[0].group for rs in labels.values()}
            agree = len(verdicts) == 1 and len(groups) == 1
            view[p] = Seen(
                sorted(labels),
                agree and verdicts == {"idle"},
                agree and verdicts <= ALIVE,
                any(x.up for rs in labels.values() for x in rs),
                groups.pop() if len(groups) == 1 else None,
                min((rs[0].idle or 0.0) for rs in labels.values()),
            )
        for p in {*self.streak, *self.first_seen, *view}:
            seen = view.get(p)
            self.streak[p] = self.streak.get(p, 0) + 1 if seen and seen.qualifies else 0
            if seen and seen.up:
                self.first_seen.setdefault(p, now)
            else:
                self.first_seen.pop(p, None)
        return view

    def recorded(self, label: str, result: StopResult, at: float) -> None:
        """What came of a planned stop of ``label``'s worker."""
        p = port_of(label)
        if result is StopResult.DRY_RUN:
            return
        self.unreachable.pop(p, None)
        if result in (StopResult.STOPPED, StopResult.UNANSWERED):
            self.retiring[p] = at
            return
        self.retiring.pop(p, None)
        self.streak[p] = 0
        self.cooldown[p] = at + self.rule.cooldown
        if result is StopResult.UNREACHABLE:
            self.unreachable[p] = at

    def restarted(self, shift: float, now: float) -> None:
        """A restart at ``now`` that kept the marks in Unix time (``shift`` apart): the
        streaks and sightings start afresh; a mark from after now counts from now, and
        a cooldown ends within ``cooldown`` from now."""
        self.streak.clear()
        self.first_seen.clear()
        clock, cooling = now + shift, now + shift + self.rule.cooldown
        for marks, latest in ((self.retiring, clock), (self.unreachable, clock)):
            marks.update({p: min(t + shift, latest) - shift for p, t in marks.items()})
        self.cooldown = {p: min(t + shift, cooling) - shift for p, t in self.cooldown.items()}

    def is_retiring(self, p: int, now: float) -> bool:
        return p in self.retiring and now - self.retiring[p] < self.rule.retiring_for

    def may_stop(self, p: int, seen: Seen, now: float) -> list[str]:
        """Why the rules forbid stopping worker ``p`` now, regardless of the floor."""
        rule, first = self.rule, self.first_seen.get(p)
        why = [] if seen.qualifies else ["not idle past the rule on every label"]
        why += (
            [f"streak {self.streak.get(p, 0)}"] if self.streak.get(p, 0) < rule.wait_count else []
        )
        why += ["retiring"] if self.is_retiring(p, now) else []
        why += ["cooling down"] if self.cooldown.get(p, -math.inf) > now else []
        why += ["min_age"] if first is None or now - first < rule.min_age else []
        return why + (["held"] if now < self.held_until else [])

    def alive(self, view: dict[int, Seen], now: float) -> dict[tuple[str, ...] | None, int]:
        counts: dict[tuple[str, ...] | None, int] = {}
        for p, seen in view.items():
            if seen.alive and not self.is_retiring(p, now):
                counts[seen.group] = counts.get(seen.group, 0) + 1
        return counts

    def expected_stops(self, view: dict[int, Seen], now: float) -> list[str]:
        """The stops the rules call for (exact where each worker has one label)."""
        due = sorted(
            (-s.idle, s.labels[0], s.group) for p, s in view.items() if not self.may_stop(p, s, now)
        )
        alive, stops = self.alive(view, now), []
        taken: dict[tuple[str, ...] | None, int] = {}
        for _, label, group in due:
            rank = taken[group] = taken.get(group, -1) + 1
            if (
                rank < alive.get(group, 0) - self.rule.min_workers
                and rank < self.rule.max_stops_per_cycle
            ):
                stops.append(label)
        return sorted(stops)

    def forbidden(
        self, plan: Plan, readings: list[Reading], view: dict[int, Seen], now: float
    ) -> list[str]:
        """Each way ``plan`` breaks the rules."""
        rule, out, held = self.rule, [], (Verdict.RATE_LIMIT, Verdict.MIN_WORKERS)
        if sorted(d.worker for d in plan.decisions) != sorted({r.worker for r in readings}):
            out.append("not one decision per label read")
        counted = (Verdict.STOP, Verdict.COOLDOWN, Verdict.MIN_AGE, *held)
        if plan.candidates != sum(d.verdict in counted for d in plan.decisions):
            out.append(f"{plan.candidates} candidates counted")
        if len({port_of(d.worker) for d in plan.stops}) < len(plan.stops):
            out.append(f"one worker stopped twice: {[d.worker for d in plan.stops]}")
        by_group: dict[tuple[str, ...] | None, list[float]] = {}
        for d in plan.stops:
            seen = view.get(port_of(d.worker))
            if seen is None or not known(d.worker):
                out.append(f"{d.worker} stopped, not read or unknown")
                continue
            why = self.may_stop(port_of(d.worker), seen, now)
            why += [] if d.worker == seen.labels[0] else ["not under its first label"]
            why += [] if d.idle == seen.idle and d.group == seen.group else ["idle or group"]
            out += [f"{d.worker} stopped: {why}"] if why else []
            by_group.setdefault(seen.group, []).append(d.idle or 0.0)
        alive = self.alive(view, now)
        holding = floor.holders(plan.decisions, plan.state.retiring)  # what floor_check asks
        for group, idles in by_group.items():
            if len(idles) > rule.max_stops_per_cycle:
                out.append(f"group {group}: {len(idles)} stops over the rate limit")
            if alive.get(group, 0) - len(idles) < rule.min_workers:
                out.append(f"group {group}: {len(idles)} stops, {alive.get(group, 0)} alive")
            held = {port_of(w) for w in holding.get(group or (), [])}
            if len(held) != alive.get(group, 0) - len(idles):
                out.append(f"group {group}: holders {sorted(held)}, not the others alive")
            for d in plan.decisions:
                if d.verdict in held and d.group == group and (d.idle or 0.0) > min(idles):
                    out.append(f"{d.worker} held back before a worker less idle")
        return out


def random_rule(rng: random.Random) -> PolicySettings:
    return PolicySettings(
        max_idle=rng.choice([1.0, 10.0, 60.0]),
        wait_count=rng.choice([1, 1, 2, 3]),
        min_workers=rng.choice([0, 1, 1, 2, 3]),
        max_stops_per_cycle=rng.choice([0, 1, 2, 5]),
        cooldown=rng.choice([0.0, 5.0, 50.0, 300.0]),
        max_staleness=rng.choice([5.0, 30.0, 60.0]),
        min_age=rng.choice([0.0, 0.0, 10.0, 100.0]),
        group_by=rng.choice([(), ("pool",)]),
        retiring_for=rng.choice([20.0, 100.0, 300.0]),
    )


@dataclass
class Fleet:
    """Workers on ports, each read under a set of spellings that changes now and then
    (unless ``simple``: one label each, no duplicates, no unknown labels), with
    readings as hostile as ``noise`` (1: mostly hostile) makes them."""

    rng: random.Random
    rule: PolicySettings
    simple: bool
    noise: float
    labels: dict[int, list[str]] = field(default_factory=dict)
    groups: dict[int, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        rng = self.rng
        for p in range(1000, 1000 + rng.randint(1, 10)):
            self.labels[p] = rng.sample(SPELLINGS, 1 if self.simple else rng.choice([1, 2, 4]))
            self.groups[p] = rng.choice(GROUPS)

    def read(self) -> list[Reading]:
        rng, rule, noisy = self.rng, self.rule, self.noise
        readings = []
        for p, spellings in self.labels.items():
            if rng.random() < 0.12:
                continue  # missing from this read
            if not self.simple and rng.random() < 0.3:
                spellings[:] = rng.sample(SPELLINGS, rng.choice([1, 1, 2, 3, 4]))
            if rng.random() < 0.05:
                self.groups[p] = rng.choice(GROUPS)
            edge = [None, math.nan, math.inf, -1.0, 0.0, rule.max_idle - 0.5, rule.max_idle, 1e9]
            base = {
                "idle": rng.choice([*edge, *[rule.max_idle * 2] * 6]),
                "up": rng.random() < 0.85,
                "supported": rng.random() < 0.9,
                "age": rng.choice(
                    [0.0, -0.0, 2.0, 2.0, rule.max_staleness, math.inf, math.nan, -1.0]
                ),
                "alerting": rng.random() < 0.9,
                "conflicting": rng.random() < 0.05,
            }
            if rng.random() > noisy:
                idle = rng.choice(
                    [rule.max_idle * 2, rule.max_idle * 4, 1.0, rule.max_idle + rng.random()]
                )
                base = {"idle": idle, "up": True, "supported": True, "age": 1.0, "alerting": True}
            for spelling in spellings:
                own = {**base, "group": self.groups[p]}
                if rng.random() < 0.15 * noisy:
                    own["idle"] = rng.choice([None, 0.0, rule.max_idle * 5, math.nan])
                elif isinstance(own["idle"], float) and 0 <= own["idle"] < math.inf:
                    own["idle"] += rng.choice([0.0, rng.random()])
                if rng.random() < 0.03 * noisy:
                    own["up"], own["group"] = not own["up"], rng.choice(GROUPS)
                reading = Reading(spelling.format(p=p), **own)  # type: ignore[arg-type]
                readings.append(reading)
                if not self.simple and rng.random() < 0.05:  # a duplicate: equal, or not
                    readings.append(rng.choice([reading, replace(reading, idle=1.0)]))
            if not self.simple and rng.random() < 0.05:
                readings.append(Reading(rng.choice(UNKNOWN).format(p=p), base["idle"]))
        rng.shuffle(readings)
        return readings
