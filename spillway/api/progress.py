"""What long work reports while it runs, for whoever listens (the CLI's progress bars and warnings on stderr):
progress stages (``listening(sink)``) and warnings (``collecting()``). Without a listener both are silent."""

from __future__ import annotations

from spillway.notices import collecting, warn
from spillway.progress import Sink, Stage, listening

__all__ = ["Sink", "Stage", "collecting", "listening", "warn"]
