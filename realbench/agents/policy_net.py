"""The element policy's network in numpy, and its checkpoint on disk.

Scoring one candidate (see `realbench.agents.policy_features`):

    a = mean(E[a-grams])                      the node's (or typed value's) text
    b = attention over the instruction        for a click: sum_k softmax_k(q_k . a / sqrt(H)) q_k
      | mean(E[b-grams])                      for typing: the focused field
      | mean_k q_k                            for back / terminate: the instruction
    logit = w2 . relu(W1 [a, b, a*b, f] + b1) + b2 + u . f

and a softmax over the screen's candidates. `devices/rl/policy_train.py` holds the same network
in torch for training; a test checks that both give the same logits. Inference needs only numpy,
so a checkpoint runs wherever realbench's base package does.

A checkpoint is a folder: ``policy.npz`` (the weights) and ``policy.json`` (`PolicyCard`: the
sizes, and how it was trained, including the exact command).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from realbench.agents.policy_features import N_FEATURES, Kind, Step
from realbench.errors import ConfigError

WEIGHTS_FILE = "policy.npz"
CARD_FILE = "policy.json"
PARAM_NAMES = ("emb", "w1", "b1", "w2", "b2", "u")

# The heuristic start: the skip weights `u` on the dense features begin by favouring nodes whose
# label shares character bigrams with the instruction (feature 8 of a click), disfavouring a stop
# (feature 3 marks terminate) and a control clicked before (feature 14). Training moves them like
# every other weight.
PRIOR_OVERLAP = 2.0
PRIOR_TERMINATE = -1.0
PRIOR_REPEAT = -1.5


class PolicyShape(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    buckets: int = Field(default=2048, ge=16)
    dim: int = Field(default=24, ge=2)
    hidden: int = Field(default=48, ge=2)
    features: int = N_FEATURES
    # scale of the heuristic start (see PRIOR_OVERLAP); 0 starts from purely random weights
    prior: float = Field(default=1.0, ge=0)
    # reads each control's row labels (policy_features.RowLabels) into its text and features 18–19
    context: bool = False


class PolicyCard(BaseModel):
    """What a checkpoint is: its shape and where it came from."""

    model_config = ConfigDict(extra="forbid")

    name: str = "element"
    shape: PolicyShape = Field(default_factory=PolicyShape)
    description: str = "a small element policy trained by RL on the clone"
    pack: str = ""
    tasks: list[str] = Field(default_factory=list)
    updates: int = 0
    seed: int = 0
    drift_randomise: list[str] = Field(default_factory=list)
    command: str = ""
    weights_sha256: str = ""
    # the CPU model the weights were trained on: the same command reproduces them bit for bit on
    # that model; another CPU's float arithmetic takes the sampled rollouts elsewhere (docs/rl.md)
    cpu: str = ""


def init_params(shape: PolicyShape, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Fresh weights (the untrained base); small embeddings, He-scaled first layer."""
    width = 3 * shape.dim + shape.features
    return {
        "emb": (rng.standard_normal((shape.buckets, shape.dim)) * 0.1).astype(np.float32),
        "w1": (rng.standard_normal((width, shape.hidden)) * np.sqrt(2.0 / width)).astype(np.float32),
        "b1": np.zeros(shape.hidden, dtype=np.float32),
        "w2": (rng.standard_normal(shape.hidden) * 0.1).astype(np.float32),
        "b2": np.zeros(1, dtype=np.float32),
        "u": _prior(shape),
    }


def _prior(shape: PolicyShape) -> np.ndarray:
    u = np.zeros(shape.features, dtype=np.float32)
    u[8] = PRIOR_OVERLAP * shape.prior
    u[int(Kind.TERMINATE)] = PRIOR_TERMINATE * shape.prior
    u[14] = PRIOR_REPEAT * shape.prior
    return u


def _bag(emb: np.ndarray, ids: list[int]) -> np.ndarray:
    if not ids:
        return np.zeros(emb.shape[1], dtype=np.float32)
    return emb[ids].mean(axis=0)


def logits(params: dict[str, np.ndarray], step: Step) -> np.ndarray:
    """One logit per candidate of `step`."""
    emb = params["emb"]
    dim = emb.shape[1]
    q = np.stack([_bag(emb, ids) for ids in step.query])  # (K, H)
    q_mean = q.mean(axis=0)
    rows = []
    for c in step.candidates:
        a = _bag(emb, c.a)
        if c.kind is Kind.CLICK:
            s = q @ a / np.sqrt(dim)
            w = np.exp(s - s.max())
            b = (w / w.sum()) @ q
        elif c.kind is Kind.TYPE:
            b = _bag(emb, c.b)
        else:
            b = q_mean
        rows.append(np.concatenate([a, b, a * b, c.f]))
    x = np.stack(rows).astype(np.float32)
    h = np.maximum(x @ params["w1"] + params["b1"], 0.0)
    return (h @ params["w2"] + params["b2"][0] + x[:, -len(params["u"]) :] @ params["u"]).astype(np.float32)


def probabilities(params: dict[str, np.ndarray], step: Step, temperature: float = 1.0) -> np.ndarray:
    """The softmax over the candidates at `temperature` (the argmax does not depend on it)."""
    z = logits(params, step) / temperature
    z = z - z.max()
    p = np.exp(z)
    return p / p.sum()


def weights_hash(params: dict[str, np.ndarray]) -> str:
    digest = hashlib.sha256()
    for name in PARAM_NAMES:
        digest.update(np.ascontiguousarray(params[name], dtype=np.float32).tobytes())
    return digest.hexdigest()


def save_checkpoint(folder: Path, params: dict[str, np.ndarray], card: PolicyCard) -> PolicyCard:
    folder.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, Any] = {n: np.asarray(params[n], dtype=np.float32) for n in PARAM_NAMES}
    np.savez_compressed(folder / WEIGHTS_FILE, **arrays)
    card = card.model_copy(update={"weights_sha256": weights_hash(params)})
    (folder / CARD_FILE).write_text(card.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return card


def load_checkpoint(folder: Path) -> tuple[dict[str, np.ndarray], PolicyCard]:
    weights, card_file = folder / WEIGHTS_FILE, folder / CARD_FILE
    if not weights.is_file() or not card_file.is_file():
        raise ConfigError(
            f"{folder} is not a policy checkpoint (needs {WEIGHTS_FILE} and {CARD_FILE})",
            hint="write one with `realbench train ... --out DIR` (--updates 0 writes the untrained base)",
        )
    card = PolicyCard.model_validate(json.loads(card_file.read_text(encoding="utf-8")))
    with np.load(weights) as data:
        params = {n: data[n].astype(np.float32) for n in PARAM_NAMES}
    if card.weights_sha256 and weights_hash(params) != card.weights_sha256:
        raise ConfigError(
            f"{weights} does not match the hash in {card_file}", hint="re-export the checkpoint"
        )
    expected = {
        "emb": (card.shape.buckets, card.shape.dim),
        "w1": (3 * card.shape.dim + card.shape.features, card.shape.hidden),
    }
    for name, want in expected.items():
        if params[name].shape != want:
            raise ConfigError(f"{weights}: {name} has shape {params[name].shape}, the card says {want}")
    return params, card
