"""Safe rewrites of checkpoints: relocate, strip channel state, clear finished markers, drop an operator.

Reached through an opened checkpoint (``spillway.open(path).relocate(RelocateOptions(...))``, docs/api.md);
``spillway.repair.operations`` runs each on the decoded source, ``spillway.repair.workflow`` writes and checks it.
"""
