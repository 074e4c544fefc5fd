"""The one prompt builder: the chat messages for a step, used by `realbench run` (through
`OpenAIAgent`) and by the trainer adapters, so a model is trained on exactly the prompt it is
evaluated with.

Two layouts, each its family's upstream agent (see `PromptLayout`):

PROGRESS_TEXT (Qwen mobile_use)
    system     the tool in qwen-agent's function-call template
    user       "The user query: …" + "Task progress …: Step 1: …; Step 2: …; " for the steps older
               than the image window, then (if the window keeps more than the current screenshot)
               each kept step's screenshot followed by the model's turn
    user       the current screenshot
TURNS (UI-TARS)
    system     "You are a helpful assistant."
    user       the whole template with the instruction
    assistant  one turn per earlier step (its screenshot before it, while inside the window)
    user       the current screenshot
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from realbench.actions import Action
from realbench.agents.formats import ActionFormat
from realbench.agents.formats.base import PromptLayout
from realbench.agents.images import ImageSize, PreparedImage

# What the prompt says for a step whose output could not be parsed.
UNPARSED = "(the output of this step could not be parsed; no action was taken)"


@dataclass(frozen=True)
class PromptStep:
    """An earlier step as a prompt shows it."""

    index: int
    action: Action | None
    thought: str | None = None
    image: PreparedImage | None = None
    # The model's own output for this step, when known: the assistant turn repeats it verbatim.
    said: str | None = None


def image_part(image: PreparedImage) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": image.data_url}}


def _turn(fmt: ActionFormat, step: PromptStep, screen: ImageSize) -> str:
    if step.said is not None:
        return step.said
    if step.action is None:
        return UNPARSED
    return fmt.render(step.action, screen, step.thought)


def _line(fmt: ActionFormat, step: PromptStep, screen: ImageSize) -> str:
    if step.action is None:
        return f"Step {step.index + 1}: {UNPARSED}"
    return f"Step {step.index + 1}: {fmt.history_line(step.action, screen)}"


def build_messages(
    fmt: ActionFormat,
    instruction: str,
    earlier: list[PromptStep],
    current: PreparedImage,
    *,
    image_window: int,
    text_history: int = 30,
) -> list[dict[str, Any]]:
    """The messages for one step. `earlier` lists the steps taken so far, oldest first; the last
    `image_window - 1` of them that have a screenshot keep it."""
    window_size = image_window - 1
    window: list[PromptStep] = []
    for step in reversed(earlier):
        if len(window) >= window_size or step.image is None:
            break
        window.insert(0, step)
    older = earlier[: len(earlier) - len(window)]
    if text_history and len(older) > text_history:
        older = older[len(older) - text_history :]
    elif not text_history:
        older = []

    messages: list[dict[str, Any]] = [{"role": "system", "content": fmt.system_prompt(current.size)}]
    if fmt.layout is PromptLayout.TURNS:
        messages.append(
            {"role": "user", "content": [{"type": "text", "text": fmt.task_text(instruction, [])}]}
        )
        for step in older:
            screen = step.image.size if step.image is not None else current.size
            messages.append({"role": "assistant", "content": _turn(fmt, step, screen)})
        for step in window:
            assert step.image is not None
            messages.append({"role": "user", "content": [image_part(step.image)]})
            messages.append({"role": "assistant", "content": _turn(fmt, step, step.image.size)})
        messages.append({"role": "user", "content": [image_part(current)]})
        return messages

    lines = [_line(fmt, s, s.image.size if s.image is not None else current.size) for s in older]
    user: list[dict[str, Any]] = [{"type": "text", "text": fmt.task_text(instruction, lines)}]
    for step in window:
        assert step.image is not None
        user.append(image_part(step.image))
        messages.append({"role": "user", "content": user})
        messages.append({"role": "assistant", "content": _turn(fmt, step, step.image.size)})
        user = []
    user.append(image_part(current))
    messages.append({"role": "user", "content": user})
    return messages
