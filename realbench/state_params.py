"""Task parameters sampled from the live start state of a clone.

A pack declares a parameter as ``{type: from_state, sampler: NAME, args: {...}}``; at
instantiation the clone's registered sampler reads the task's start state (built from its
``clone.setup``) and draws one value with the instance's seeded generator. A sampled value is a
small dict (a trip: ``from``, ``to``, ``train``, ``date``...), so templates say ``{trip.train}``.

Samplers are registered by the clone packages, like verifiers, each with a typed argument model and
the fields it returns; `check-pack` checks the names, the arguments and every ``{param.field}``
placeholder against that contract. A sampler that finds nothing to draw raises `NothingToSample`,
which names the task, the parameter and the arguments.

The core never imports a clone: it only looks samplers up in this registry.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from realbench.errors import ConfigError, UnknownNameError

State = dict[str, Any]


class SamplerArgs(BaseModel):
    """Base of every sampler's argument model: unknown arguments are refused."""

    model_config = ConfigDict(extra="forbid")


class NothingToSample(ConfigError):
    """The start state holds nothing that satisfies a sampler's arguments."""


SampleFn = Callable[[State, Any, np.random.Generator, date], dict[str, Any]]
StartState = Callable[[Any], State]


@dataclass(frozen=True)
class StateSampler:
    """A registered sampler: ``fn(start_state, args, rng, today) -> {field: value}``."""

    name: str
    fn: SampleFn
    args: type[SamplerArgs]
    fields: frozenset[str]
    clone: str = ""


class StateSamplerSet(dict[str, StateSampler]):
    """A clone's samplers by name, registered with a decorator beside their code."""

    def sampler(
        self, name: str, *, args: type[SamplerArgs], fields: Iterable[str]
    ) -> Callable[[SampleFn], SampleFn]:
        def deco(fn: SampleFn) -> SampleFn:
            self[name] = StateSampler(name, fn, args, frozenset(fields))
            return fn

        return deco


@dataclass(frozen=True)
class _CloneSamplers:
    start_state: StartState
    samplers: StateSamplerSet


_REGISTRY: dict[str, _CloneSamplers] = {}
_START_CACHE: dict[tuple[str, str], State] = {}


def register_state_samplers(clone: str, start_state: StartState, samplers: StateSamplerSet) -> None:
    """Make a clone's samplers known. Sampler names are global (a task names no clone), so a name
    another clone already uses is refused."""
    for name in samplers:
        for other, entry in _REGISTRY.items():
            if other != clone and name in entry.samplers:
                raise ConfigError(
                    f"state sampler {name!r} of clone {clone!r} is already registered by {other!r}"
                )
    tagged = StateSamplerSet(
        {n: StateSampler(s.name, s.fn, s.args, s.fields, clone) for n, s in samplers.items()}
    )
    _REGISTRY[clone] = _CloneSamplers(start_state, tagged)
    for key in [k for k in _START_CACHE if k[0] == clone]:
        del _START_CACHE[key]


def find_sampler(name: str) -> StateSampler:
    for entry in _REGISTRY.values():
        if name in entry.samplers:
            return entry.samplers[name]
    known = sorted(n for e in _REGISTRY.values() for n in e.samplers)
    raise UnknownNameError("state sampler", name, known)


def sampler_names(clone: str) -> list[str]:
    entry = _REGISTRY.get(clone)
    return sorted(entry.samplers) if entry else []


def parse_args(sampler: StateSampler, args: dict[str, Any]) -> SamplerArgs:
    try:
        return sampler.args.model_validate(args)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(args)"
        raise ConfigError(
            f"state sampler {sampler.name!r}: bad argument {where}: {first['msg']}",
            hint=f"it takes: {', '.join(sampler.args.model_fields) or 'nothing'}",
        ) from None


def start_state(clone: str, setup: BaseModel) -> State:
    """The clone's start state for a setup, built once per setup and shared read-only: samplers
    must not change it."""
    key = (clone, json.dumps(setup.model_dump(mode="json"), sort_keys=True, ensure_ascii=False))
    state = _START_CACHE.get(key)
    if state is None:
        state = _REGISTRY[clone].start_state(setup)
        if len(_START_CACHE) > 256:
            _START_CACHE.clear()
        _START_CACHE[key] = state
    return state


def sample(
    task_id: str,
    param: str,
    sampler_name: str,
    args: dict[str, Any],
    setup: BaseModel,
    rng: np.random.Generator,
    today: date,
) -> dict[str, Any]:
    """One sampled value of a ``from_state`` parameter."""
    sampler = find_sampler(sampler_name)
    parsed = parse_args(sampler, args)
    state = start_state(sampler.clone, setup)
    try:
        value = sampler.fn(state, parsed, rng, today)
    except NothingToSample as exc:
        raise NothingToSample(
            f"task {task_id!r}: parameter {param!r} (sampler {sampler_name!r}, args {args}) found nothing "
            f"in the start state: {exc.message}",
            hint="loosen the sampler's arguments or change the task's clone.setup",
        ) from None
    missing = sampler.fields - set(value)
    if missing:
        raise ConfigError(f"state sampler {sampler_name!r} returned no {sorted(missing)}")
    return value
