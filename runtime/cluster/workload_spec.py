"""What a live workload is (:class:`LiveWorkload`), apart from how its tasks are built
(:mod:`runtime.cluster.workload`): a plain dataclass that imports nothing heavy, so that the CLI
can read its defaults while it builds its parser."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

#: Video apps with live kernels (the TPDS pipelines the runtime implements).
VIDEO_APPS: tuple[str, ...] = ("intrusion_detection", "video_synopsis")


@dataclass(frozen=True)
class LiveWorkload:
    """Streams of tasks for a live run.

    :param apps: app name -> weight; streams are dealt to apps in proportion.
    :param streams: number of streams (cameras, signal sources); chunk ``k`` of a stream is task
        data ``make_task_data(app, stream, k)``.
    :param tasks: tasks in all.
    :param rate_per_s: Poisson arrival rate over all streams, tasks per second.
    :param scale: kernel data size, ``small`` or ``medium``.
    :param seed: arrivals and data seed.
    """

    apps: Mapping[str, float] = field(default_factory=lambda: {a: 1.0 for a in VIDEO_APPS})
    streams: int = 6
    tasks: int = 300
    rate_per_s: float = 40.0
    scale: str = "small"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.streams < 1 or self.tasks < 0 or self.rate_per_s <= 0:
            raise ValueError("streams must be >= 1, tasks >= 0 and rate_per_s > 0")
        if not self.apps or any(w <= 0 for w in self.apps.values()):
            raise ValueError("apps must name at least one app with a positive weight")
