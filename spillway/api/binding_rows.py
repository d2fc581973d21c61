"""The binding's rows as every JSON report carries them, on their own: a command that only shows a binding
(dump, files, diff) loads none of validate's or analyze's machinery through them."""

from __future__ import annotations

from spillway.inspect.reports import binding_json, uid_map_template

__all__ = ["binding_json", "uid_map_template"]
