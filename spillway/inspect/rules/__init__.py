"""``validate``'s rules (the table in ``findings.RULES`` and docs/validate.md), one module per family:

* ``structure`` and ``key_groups`` — the metadata alone;
* ``files`` — every referenced file against what its handles need;
* ``chunks`` — each channel-state blob's header and chunk chain, and each handle's chunks in it;
* ``records`` — the framer's faults along each logical channel;
* ``against_plan`` — what needs the plan: binding, where channel state sits.

The checks take what was read (a chunk map, a file size, the framer's faults) and yield findings; reading
the bytes, threads and the C framer are ``validate_engine``'s.
"""
