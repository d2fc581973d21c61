"""Remove operators' state entirely."""

from __future__ import annotations

import spillway.api as api
from spillway.cli.repair_common import operators_repair

HELP = """Remove the chosen operators' state from a checkpoint — also from checkpoints with channel
state, which the State Processor API cannot open. Channels into or out of a dropped operator lose
both halves (needs --plan when the operator holds channel state). The remaining operators then
restore without --allowNonRestoredState.

Examples:

  spillway repair drop-operator chk-42 --out chk-42-without-audit --operator audit --plan plan.json
"""


command = operators_repair("drop-operator", HELP, api.DropOperatorOptions, api.Checkpoint.drop_operator)
