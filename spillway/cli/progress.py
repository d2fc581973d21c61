"""Progress bars for long commands: on stderr, only when stderr is a terminal, gone when done."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from spillway.api import Stage, listening
from spillway.cli.render import console


class _Count(ProgressColumn):
    """``12.3/45.6 MB`` for bytes, ``3/7 files`` for everything else."""

    def __init__(self) -> None:
        super().__init__()
        self._bytes = DownloadColumn()
        self._count = MofNCompleteColumn()

    def render(self, task: Task) -> Text:
        unit = task.fields.get("unit", "")
        if unit == "bytes":
            return self._bytes.render(task)
        return Text.assemble(self._count.render(task), f" {unit}")


class _Stage:
    def __init__(self, bar: Progress, task: TaskID) -> None:
        self.bar, self.task = bar, task

    def advance(self, n: int = 1) -> None:
        self.bar.advance(self.task, n)

    def update(self, completed: int, total: int | None = None) -> None:
        self.bar.update(self.task, completed=completed, total=total)  # rich keeps the total when None

    def done(self) -> None:
        task = self.bar._tasks.get(self.task)
        if task is not None and task.total is not None:
            self.bar.update(self.task, completed=task.total)


class _Bars:
    """Starts the bars when the first stage is announced: a command without long work shows nothing."""

    def __init__(self, words: Callable[[str], str]) -> None:
        self.words, self.started = words, False
        columns = (TextColumn("{task.description}"), BarColumn(), _Count(), TimeElapsedColumn())
        self.bar = Progress(*columns, console=console("err"), transient=True)

    def stage(self, description: str, total: int | None, unit: str) -> Stage:
        if not self.started:
            self.bar.start()
            self.started = True
        return _Stage(self.bar, self.bar.add_task(self.words(description), total=total, unit=unit))


@contextmanager
def progress_bars(words: Callable[[str], str] = str) -> Iterator[None]:
    """Show the library's progress stages as bars on stderr (a terminal: ``common.guarded`` asks) while the block
    runs; ``words``: a stage's name in the front end's words (the library's name it is given)."""
    bars = _Bars(words)
    try:
        with listening(bars):
            yield
    finally:
        if bars.started:
            bars.bar.stop()
