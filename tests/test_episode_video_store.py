"""An episode's video travels with its result into the run store and out to both replay viewers
(the report's and the console's); episodes without one carry none."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from analysis.report import episode_video
from realbench.console.episodes import episode_view
from realbench.episode import EpisodeResult
from realbench.outcome import EndReason, Outcome
from realbench.store import VIDEO_FILE, EpisodeKey, RunStore

MP4 = b"\x00\x00\x00\x1cftypisom" + bytes(range(200))  # the bytes are kept as they are


def result(video: bytes | None) -> EpisodeResult:
    return EpisodeResult(
        task_id="t",
        seed=0,
        instruction="do it",
        params={},
        agent="golden",
        target="clone-on-phone",
        device={"kind": "virtual-phone", "serial": "127.0.0.1:1"},
        outcome=Outcome.FAILURE,
        end_reason=EndReason.TERMINATE,
        video=video,
    )


def test_video_is_stored_with_the_episode_and_shown_by_both_viewers(tmp_path: Path) -> None:
    with RunStore(tmp_path / "run", writer="test") as store:
        store.ensure_run("r", pack="p", app="p", agent="golden", target="clone-on-phone", config={})
        with_video = store.write_episode("r", EpisodeKey("t", 0, 0), 0, "p", result(MP4))
        without = store.write_episode("r", EpisodeKey("t", 1, 0), 0, "p", result(None))
        folder = store.episode_dir(with_video)
        assert (folder / VIDEO_FILE).read_bytes() == MP4
        assert json.loads((folder / "episode.json").read_text())["video"] == VIDEO_FILE
        assert not (store.episode_dir(without) / VIDEO_FILE).exists()
        assert json.loads((store.episode_dir(without) / "episode.json").read_text())["video"] is None

        shown = episode_view(store, with_video)["video"]
        assert shown.startswith("data:video/mp4;base64,")
        assert base64.b64decode(shown.split(",", 1)[1]) == MP4
        assert episode_video(folder) == shown
        assert episode_view(store, without)["video"] is None
