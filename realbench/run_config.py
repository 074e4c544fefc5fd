"""What one `realbench run` does: the pack, the target, the agent and how to run them.

One model for the CLI, the study and anything else that runs a pack (`devices.pack_run.run_pack`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from realbench.errors import ConfigError


class AgentOptions(BaseModel):
    """Settings of a model agent (`--agent openai`); other agents ignore them."""

    model_config = ConfigDict(extra="forbid")

    base_url: str | None = None
    model: str | None = None
    fmt: str | None = None
    api_key_env: str | None = None
    max_pixels: int | None = Field(default=None, ge=1)  # the image policy's pixel budget
    history_images: int | None = Field(default=None, ge=0)  # past screenshots sent with each request
    temperature: float | None = Field(default=None, ge=0.0)
    max_tokens: int | None = Field(default=None, ge=1)


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pack: Path  # a taskpacks/<app> folder or a pack.yaml
    out: Path  # the run store (created; a rerun resumes)
    target: str = "clone"  # clone | clone-on-phone | real
    agent: str = "golden"  # golden | openai | synthetic:NAME | replay:STORE[#RUN_ID]
    repeats: int = Field(default=1, ge=1)
    seed: int = 0  # the seed of repeat 0; repeat r uses seed + r
    tasks: str | None = None  # comma-separated task ids, or @FILE (a signal-task list)
    workers: int = Field(default=1, ge=1)  # parallel headless clone environments
    run_id: str | None = None  # default AGENT@TARGET
    rig: Path | None = None  # the rig of phone targets
    scheduler: str = "local"  # local | ray (phone targets)
    server_url: str | None = None  # a running clone server instead of an in-process one
    drift: str | None = None  # drift profile of clone targets
    scale: float = Field(default=2.625, gt=0)  # device pixel ratio of headless clones
    agent_options: AgentOptions = Field(default_factory=AgentOptions)
    max_attempts: int = Field(default=3, ge=1)  # attempts per episode when the device fails
    retry_given_up: bool = False  # a rerun gives given-up episodes another max_attempts attempts
    progress: bool = True
    confirm_manual: bool = False  # real: the tasks' manual preconditions hold (recorded in the run)
    certified: Path | None = None  # real: run only the tasks this certification file certifies
    video: bool = False  # phones: record each episode's screen (kept as video.mp4 with the episode)

    @classmethod
    def of(cls, **settings: Any) -> RunConfig:
        """A RunConfig from settings (CLI options), refused as a ConfigError naming the setting."""
        try:
            return cls(**settings)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise ConfigError(f"run setting {where}: {err['msg']} (got {err.get('input')!r})") from None
