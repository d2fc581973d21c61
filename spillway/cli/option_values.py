"""Option values checked and put the way the API takes them, without typer: the plain fast path
(cli/fast.py) uses these as the typer commands do."""

from __future__ import annotations

from spillway.api import UsageError


def uid_pairs(plan: str | None, uid: list[str] | None, uid_map: str | None) -> dict[str, str]:
    """--uid NAME=UID pairs (checked: --uid and --uid-map need --plan)."""
    if plan is None and (uid or uid_map):
        raise UsageError("--uid and --uid-map need --plan")
    uids: dict[str, str] = {}
    for item in uid or []:
        name, sep, value = item.rpartition("=")
        if not sep or not name or not value:
            raise UsageError(f"--uid {item!r}: expected NAME=UID")
        uids[name] = value
    return uids


def rebase_rules(values: list[str] | None) -> list[str] | None:
    """--rebase OLD=NEW rules, their syntax checked here (the API names its own argument otherwise)."""
    for text in values or []:
        old, sep, new = text.partition("=")
        if not sep or not old or not new:
            raise UsageError(f"--rebase expects OLD_PREFIX=NEW_PREFIX, got {text!r}")
    return values


__all__ = ["rebase_rules", "uid_pairs"]
