"""The scenario generator (``rlsched scenarios generate``): families of random scenarios that vary
what the held-out cases show matters, each case at a drawn offered load, written as scenario files
with an index (``cases.json``) that says which seed set and family each case belongs to.

One module per job: :mod:`~experiments.scenario_gen.families` (the families; their fleets in
:mod:`~experiments.scenario_gen.fleet`, workloads in :mod:`~experiments.scenario_gen.workload`,
data derived from the Alibaba trace in :mod:`~experiments.scenario_gen.trace_data`),
:mod:`~experiments.scenario_gen.size` (sizing a run to its fleet),
:mod:`~experiments.scenario_gen.load` (setting the offered load),
:mod:`~experiments.scenario_gen.generate` (seed and family rules, writing a set) and
:mod:`~experiments.scenario_gen.index` (the index and its reader, :func:`read_index`).
"""
