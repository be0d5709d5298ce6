"""Acting on scores, one module each (pure: no model code):

- ``ranking``: ``PassRules``, ranking and thresholds; ``acceptance``: ``RunRules`` and the sample-until loop's
  decisions (seeds, verdicts, what is kept);
- ``pruning``: which steps are judged, the phases of one round and who goes on; ``ledger``: what pruning cost;
  ``samplers``: what pruning and a batched round know of core's samplers, by name;
- ``sample_until``: the whole Sample Until run behind the host's ``CandidateSampler``;
- ``picks``: the artist's picks (MaSC Pick); ``contact_sheet``: every candidate side by side;
- ``clip``: which frames of a clip are scored, and the clip's CP and PF from its frames';
- ``sweep``: MaSC Sweep's verdict over generator variants (paired intervals, ties, the PF margin) and its race;
  ``sweep_cells``: its cells from LoRA choices (names, weakness, what cannot be a cell); ``sweep_figures``: its
  CP-PF chart, its grid and its table.

Nothing is imported here: each module is imported by name, so importing one loads no model code.
"""
