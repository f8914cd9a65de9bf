"""The sweep's progress bar: :class:`spectral.sweep.train.RunProgress` drawn with rich."""

from __future__ import annotations

from typing import Any

__all__ = ["StepBar"]


class StepBar:
    """:class:`spectral.sweep.train.RunProgress` as a rich bar: steps trained, elapsed, ETA."""

    def __init__(self) -> None:
        self._bar: Any = None
        self._task: Any = None

    def start(self, description: str, total: int) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("steps"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
        )
        self._bar.start()
        self._task = self._bar.add_task(description, total=total)

    def describe(self, description: str) -> None:
        self._bar.update(self._task, description=description)

    def advance(self, steps: int) -> None:
        self._bar.advance(self._task, steps)

    def stop(self) -> None:
        self._bar.stop()
