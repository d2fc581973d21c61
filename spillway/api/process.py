"""What a program that is one command (the CLI) sets up for its process, before the command runs.

Cheap to import: each setting loads the layer it configures only when it is called."""

from __future__ import annotations

from spillway.storage.timeouts import set_timeout as set_storage_timeout

__all__ = ["freeze_after_pauses", "set_storage_timeout"]


def freeze_after_pauses() -> None:
    """Decoded checkpoints skip the cycle collector for the rest of the process (see
    ``metadata_codec.freeze_after_pauses``): for a process that ends with its command, never a library."""
    from spillway.formats.metadata_codec import freeze_after_pauses as freeze

    freeze()
