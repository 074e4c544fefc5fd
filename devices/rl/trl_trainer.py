"""`EpisodeGRPOTrainer`: TRL's GRPOTrainer with a loss over every step of each clone episode.

TRL 1.16's rollout hook returns one (prompt, completion) per dataset row, and the forward pass
conditions it on that row's dataset images, so through the hook alone only an episode's first step
can be trained on (a later step's screenshot has no way in). This trainer plays the episodes first
(with the `CloneEpisodeRollout` it is given) and then hands GRPOTrainer's own scoring one row per
*step* — that step's prompt and screenshots, as the step was sampled — so each step's tokens are
scored, and enter the loss, conditioned on exactly what the model saw when it said them. GRPO's
advantage is still the episode's: the episodes' rewards are normalised within each group of
``num_generations`` episodes from one start state (TRL's `scale_rewards` rule), and every step of
an episode carries its episode's advantage.

    trainer = EpisodeGRPOTrainer(model=..., processing_class=processor, rollout_func=rollout,
                                 reward_funcs=[episode_return_reward], args=..., train_dataset=...)

Only single-process training is supported (the advantages are computed over the local batch).
"""

from __future__ import annotations

from typing import Any

import torch
from trl import GRPOTrainer

from devices.rl.trl_adapter import CloneEpisodeRollout
from realbench.errors import ConfigError


class EpisodeGRPOTrainer(GRPOTrainer):  # type: ignore[misc]
    """GRPOTrainer whose loss covers every step of the episodes a `CloneEpisodeRollout` plays."""

    # set by GRPOTrainer from its args; declared for the type checker, which sees TRL as Any
    num_generations: int | None
    num_generations_eval: int | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        rollout_func = kwargs.get("rollout_func")
        if not isinstance(rollout_func, CloneEpisodeRollout):
            raise ConfigError("EpisodeGRPOTrainer needs a CloneEpisodeRollout as its rollout_func")
        super().__init__(*args, **kwargs)
        if self.accelerator.num_processes != 1:
            raise ConfigError("EpisodeGRPOTrainer runs in one process only")
        self.episode_rollout = rollout_func
        self._step_rewards: torch.Tensor | None = None
        self.rows_scored = 0  # step rows handed to the loss so far (one per played step)

    def _calculate_rewards(
        self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any
    ) -> Any:
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._step_rewards = rewards
        return rewards

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        training = bool(getattr(self.model, "training", True))
        group = (self.num_generations if training else self.num_generations_eval) or 1
        rollout = self.episode_rollout
        played = [rollout.play_row(rollout.states.start(str(row["key"])), self) for row in inputs]
        step_rows: list[dict[str, Any]] = []
        episode_of_row: list[int] = []
        first_rows: list[int] = []
        for index, (row, (episode, steps)) in enumerate(zip(inputs, played, strict=True)):
            first_rows.append(len(step_rows))
            for step in steps:
                step_rows.append({**row, "prompt": step.prompt, "images": step.images})
                episode_of_row.append(index)
            rollout.episodes.append(episode)
        # what the hook answers for these rows, in order
        rollout.replay = [(step, episode) for episode, steps in played for step in steps]
        # GRPO's own grouping would split the step rows into groups of `group` rows, which are not
        # episodes; with groups of one it scores them, and the advantages are set here instead.
        saved = self.num_generations, self.num_generations_eval
        self.num_generations = self.num_generations_eval = 1
        try:
            output: dict[str, Any] = super()._generate_and_score_completions(step_rows)
        finally:
            self.num_generations, self.num_generations_eval = saved
            rollout.replay = None
        rewards = self._step_rewards
        if rewards is None:
            raise ConfigError("GRPOTrainer scored the steps without its reward functions")
        weights = self.reward_weights.to(rewards.device)
        returns = (rewards[first_rows] * weights.unsqueeze(0)).nansum(dim=1)
        advantages = self._episode_advantages(returns, group)
        output["advantages"] = advantages[torch.tensor(episode_of_row)].to(output["advantages"].device)
        self.rows_scored += int(output["completion_ids"].shape[0])
        return output

    def _episode_advantages(self, returns: torch.Tensor, group: int) -> torch.Tensor:
        """GRPO's advantage of each episode within its group (TRL's `scale_rewards` rule)."""
        grouped = returns.view(-1, group)
        mean = grouped.mean(dim=1).repeat_interleave(group)
        advantages = returns - mean
        if self.scale_rewards == "group" and group > 1:
            advantages = advantages / (grouped.std(dim=1).repeat_interleave(group) + 1e-4)
        elif self.scale_rewards == "batch" and returns.numel() > 1:
            advantages = advantages / (returns.std() + 1e-4)
        return advantages
