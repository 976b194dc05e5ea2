"""Interference models over (kind, partner, device) triples: NeuMF and its classic baselines.

Every model maps a batch of index tensors (kind, partner, device) plus per-row side features to
two outputs: a *feasibility logit* (can ``kind`` share the device with ``partner`` at all?) and
the *normalised co-located throughput* when it can. Measurements code "cannot share" as a
throughput of 0; regressing through that cliff would smear it into small positive numbers that
are wrong both ways, so feasibility is a classification head and the throughput head learns from
feasible rows only. A prediction is 0 where the feasibility probability is below one half: with
probability ``q`` of sharing, answering the throughput ``v`` costs an expected ``(1 - q) v`` of
absolute error and answering 0 costs ``q v``, so one half is the threshold that minimises it.

Index ``-1`` stands for an entity outside the vocabulary (cold start): its id embeddings, factors
and biases are zero, so a model answers from what it shares across entities (side features,
global and device terms).

- :class:`~models.interference.neumf.NeuMF` — GMF + MLP towers (He et al., 2017) over
  embeddings of kind, partner and device, each the sum of an id embedding and a linear map of
  side features.
- :class:`~models.interference.biased_mf.BiasedMF` — the Paragon/Quasar baseline: SVD-style
  matrix factorisation with global, device, row and column biases, trained by SGD.
- :class:`~models.interference.mean_model.MeanModel` — the kind's mean throughput on the
  device, whoever the partner is.
- :class:`~models.interference.ensemble.Ensemble` — the average of several of them.

The other modules: :mod:`~models.interference.rows` (a training set as tensors),
:mod:`~models.interference.training` (fitting), :mod:`~models.interference.online` (learning
from new samples afterwards), :mod:`~models.interference.inference` (predictions),
:mod:`~models.interference.tables` (id-table lookups shared by the models) and
:mod:`~models.interference.threads` (running torch on one thread).

State is a plain ``state_dict`` (tensors only) plus each model's ``config()``, a JSON-able dict
that rebuilds the module (:func:`~models.interference.ensemble.build`, by class name); nothing
is pickled.
"""
