"""What a program that is one command (the CLI) sets up for its process, before the command runs.

Cheap to import: each setting loads the layer it configures only when it is called."""

from __future__ import annotations


def freeze_after_pauses() -> None:
    """Decoded checkpoints skip the cycle collector for the rest of the process (see
    ``metadata_codec.freeze_after_pauses``): for a process that ends with its command, never a library."""
    from spillway.formats.metadata_codec import freeze_after_pauses as freeze

    freeze()


def set_storage_timeout(seconds: float | None) -> None:
    """How long any remote call may take (``spillway.storage.timeouts``; None: the environment or the default)."""
    from spillway.storage.timeouts import set_timeout

    set_timeout(seconds)
