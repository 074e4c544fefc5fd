"""`realbench serve-model`: start `vllm serve` for a Qwen-VL-class agent or judge, and check that
an OpenAI-compatible endpoint is up.

vLLM needs a CUDA GPU and is not a dependency of realbench; where it is missing, the command says
so and what to do instead. The API key (if any) is handed to vLLM through its environment
(``VLLM_API_KEY``), never on the command line, where `ps` would show it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from realbench.agents.images import ImagePolicy
from realbench.errors import ConfigError, ModelError, ServerError

log = logging.getLogger(__name__)

# The oldest vLLM that serves Qwen3-VL and takes its processor's `size` limits and
# `--generation-config vllm`.
MIN_VLLM = (0, 11, 0)


class PixelLimitForm(StrEnum):
    """How the processor takes its pixel limits."""

    PIXELS = "pixels"  # Qwen2/2.5-VL: {"max_pixels": …, "min_pixels": …}
    SIZE = "size"  # Qwen3-VL: {"size": {"longest_edge": max_pixels, "shortest_edge": min_pixels}}


def limits_for_format(format_name: str, *, history_images: int | None = None) -> dict[str, Any]:
    """The server limits that match a format's image policy: the server then never resizes an
    image the client already sized (which would move every pixel-coordinate click)."""
    from realbench.agents.formats import get_format
    from realbench.agents.formats.qwen_mobile import ModelFamily, QwenMobileFormat

    fmt = get_format(format_name)
    policy = fmt.image_policy()
    qwen3 = isinstance(fmt, QwenMobileFormat) and fmt.family is ModelFamily.QWEN3
    return {
        "max_pixels": policy.max_pixels,
        "min_pixels": policy.min_pixels,
        "max_images": history_images or fmt.default_image_window(),
        "pixel_form": PixelLimitForm.SIZE if qwen3 else PixelLimitForm.PIXELS,
    }


def serve_limits(
    format_name: str, *, max_images: int | None = None, max_pixels: int | None = None
) -> dict[str, Any]:
    """`ServeConfig` fields for a format, with explicit overrides (the same ones `run` takes)."""
    limits = limits_for_format(format_name, history_images=max_images)
    if max_pixels is not None:
        limits["max_pixels"] = max_pixels
        limits["min_pixels"] = min(limits["min_pixels"], max_pixels)
    return limits


class ServeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, protected_namespaces=())

    model: str = Field(min_length=1, description="checkpoint folder or hub id")
    served_name: str | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    tensor_parallel: int = Field(default=1, ge=1)
    gpus: str | None = Field(default=None, description="CUDA_VISIBLE_DEVICES for the server, e.g. '0,1'")
    max_model_len: int = Field(default=32768, ge=1024)
    max_num_seqs: int = Field(default=64, ge=1)
    gpu_memory_utilization: float = Field(default=0.90, gt=0.05, le=0.99)
    max_images: int = Field(
        default=5, ge=1, le=64, description="images per prompt (history window + current)"
    )
    max_pixels: int = Field(default=ImagePolicy().max_pixels, ge=28 * 28)
    min_pixels: int = Field(default=ImagePolicy().min_pixels, ge=1)
    pixel_form: PixelLimitForm = PixelLimitForm.PIXELS
    max_tokens: int | None = Field(default=None, ge=1, description="server-side cap on generated tokens")
    dtype: str = "bfloat16"
    tools: bool = Field(default=False, description="parse <tool_call> replies into structured tool calls")
    seed: int = 0
    api_key_env: str | None = None
    extra_args: list[str] = Field(default_factory=list)

    @property
    def name(self) -> str:
        return self.served_name or Path(self.model).name or self.model

    def effective_defaults(self) -> dict[str, Any]:
        """What the server applies to a request that leaves a sampling parameter out: vLLM's own
        neutral defaults, never the checkpoint's generation_config.json (the client sends every
        parameter anyway; this is recorded so a run can show it)."""
        return {
            "generation_config": "vllm",
            "temperature": 1.0,
            "top_p": 1.0,
            "top_k": -1,
            "repetition_penalty": 1.0,
            "max_tokens": self.max_tokens,
            "image_limits": self.processor_limits(),
        }

    def processor_limits(self) -> dict[str, Any]:
        if self.pixel_form is PixelLimitForm.SIZE:
            return {"size": {"longest_edge": self.max_pixels, "shortest_edge": self.min_pixels}}
        return {"max_pixels": self.max_pixels, "min_pixels": self.min_pixels}

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{self.port}/v1"


def vllm_command(cfg: ServeConfig, executable: str = "vllm") -> list[str]:
    """The `vllm serve` argument list for a Qwen-VL-class model (no secrets in it)."""
    cmd = [
        executable,
        "serve",
        cfg.model,
        "--served-model-name",
        cfg.name,
        "--host",
        cfg.host,
        "--port",
        str(cfg.port),
        "--tensor-parallel-size",
        str(cfg.tensor_parallel),
        "--max-model-len",
        str(cfg.max_model_len),
        "--max-num-seqs",
        str(cfg.max_num_seqs),
        "--gpu-memory-utilization",
        f"{cfg.gpu_memory_utilization:g}",
        "--dtype",
        cfg.dtype,
        "--seed",
        str(cfg.seed),
        # screenshots of a history window: several images per prompt, each within the pixel budget;
        # no video, so vLLM reserves no memory for it
        "--limit-mm-per-prompt",
        json.dumps({"image": cfg.max_images, "video": 0}),
        "--mm-processor-kwargs",
        json.dumps(cfg.processor_limits()),
        # a checkpoint's generation_config.json must not change how it samples
        "--generation-config",
        "vllm",
        # consecutive steps share the system prompt and most of the history
        "--enable-prefix-caching",
    ]
    if cfg.tools:
        cmd += ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    if cfg.max_tokens is not None:
        cmd += ["--override-generation-config", json.dumps({"max_new_tokens": cfg.max_tokens})]
    return cmd + list(cfg.extra_args)


def vllm_version(executable: str) -> tuple[int, ...]:
    """The installed vLLM's version, from `vllm --version`."""
    try:
        done = subprocess.run([executable, "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ModelError(
            f"`{executable} --version` failed: {exc}", hint="check the vLLM installation"
        ) from None
    m = re.search(
        r"(\d+)\.(\d+)(?:\.(\d+))?", done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    )
    if m is None:
        raise ModelError(
            f"cannot read vLLM's version from {done.stdout.strip()[:80]!r}",
            hint="check the vLLM installation",
        )
    return tuple(int(g or 0) for g in m.groups())


def check_vllm_version(executable: str) -> tuple[int, ...]:
    version = vllm_version(executable)
    if version < MIN_VLLM:
        have, need = ".".join(map(str, version)), ".".join(map(str, MIN_VLLM))
        raise ModelError(
            f"vLLM {have} is older than {need}, the oldest that serves these models as realbench expects",
            hint=f"pip install 'vllm>={need}'",
        )
    return version


def find_vllm() -> str:
    exe = shutil.which("vllm")
    if exe is None:
        raise ModelError(
            "vLLM is not installed here (no `vllm` on PATH)",
            hint="on a machine with a CUDA GPU: `pip install vllm`, then rerun; or point "
            "`realbench run --base-url` at a server that is already running",
        )
    return exe


def list_models(base_url: str, *, api_key: str | None = None, timeout_s: float = 5.0) -> list[str]:
    """Model ids served at `base_url` (GET /models); raises ServerError when it does not answer."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = httpx.get(base_url.rstrip("/") + "/models", headers=headers, timeout=timeout_s)
        response.raise_for_status()
        data: Any = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise ServerError(
            f"no OpenAI-compatible endpoint answers at {base_url}: {type(exc).__name__}",
            hint="start one with `realbench serve-model MODEL` (or `vllm serve`) and check the URL ends in /v1",
        ) from None
    return [m.get("id", "") for m in data.get("data", []) if isinstance(m, dict)]


def wait_for_endpoint(
    base_url: str,
    *,
    timeout_s: float = 900.0,
    process: subprocess.Popen[bytes] | None = None,
    api_key: str | None = None,
    poll_s: float = 1.0,
    log_path: Path | None = None,
) -> list[str]:
    """Poll until the endpoint lists its models; fail early if the server process dies."""
    deadline = time.monotonic() + timeout_s
    while True:
        if process is not None and process.poll() is not None:
            tail = ""
            if log_path is not None and log_path.exists():
                tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-20:])
            raise ServerError(
                f"the model server exited with code {process.returncode} before it was ready\n{tail}",
                hint=f"read the server log{f' at {log_path}' if log_path else ''}",
            )
        try:
            return list_models(base_url, api_key=api_key, timeout_s=min(5.0, poll_s * 2))
        except ServerError:
            if time.monotonic() > deadline:
                raise ServerError(
                    f"the model server at {base_url} was not ready after {timeout_s:.0f}s",
                    hint="large checkpoints take minutes to load; raise --timeout or read the server log",
                ) from None
        time.sleep(poll_s)


def start_server(cfg: ServeConfig, *, log_path: Path) -> subprocess.Popen[bytes]:
    """Start `vllm serve` in the background, its output going to `log_path`."""
    exe = find_vllm()
    check_vllm_version(exe)
    env = dict(os.environ)
    if cfg.gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = cfg.gpus
    if cfg.api_key_env:
        key = os.environ.get(cfg.api_key_env)
        if not key:
            raise ConfigError(
                f"environment variable {cfg.api_key_env} (the API key) is not set",
                hint=f"export {cfg.api_key_env}=...",
            )
        env["VLLM_API_KEY"] = key
    cmd = vllm_command(cfg, exe)
    log.info("starting %s", " ".join(cmd))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def stop_server(process: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def serve_model(
    cfg: ServeConfig,
    *,
    log_path: Path,
    ready_timeout_s: float = 900.0,
    foreground: bool = True,
    on_ready: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Start the server, wait until it answers; in the foreground, keep it running until Ctrl-C."""
    process = start_server(cfg, log_path=log_path)
    key = os.environ.get(cfg.api_key_env) if cfg.api_key_env else None
    try:
        models = wait_for_endpoint(
            cfg.base_url, timeout_s=ready_timeout_s, process=process, api_key=key, log_path=log_path
        )
    except BaseException:
        stop_server(process)
        raise
    info = {
        "base_url": cfg.base_url,
        "models": models,
        "pid": process.pid,
        "log": str(log_path),
        "effective_defaults": cfg.effective_defaults(),
    }
    # beside the log, so a run can be checked against how its server sampled
    log_path.with_suffix(".serve.json").write_text(
        json.dumps({**info, "command": vllm_command(cfg)}, indent=2, ensure_ascii=False)
    )
    if on_ready is not None:
        on_ready(info)
    if foreground:
        log.warning("serving %s at %s (Ctrl-C stops it)", cfg.name, cfg.base_url)
        try:
            process.wait()
        except KeyboardInterrupt:
            pass
        finally:
            stop_server(process)
    return info
