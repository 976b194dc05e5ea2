"""Torch networks and their checkpoints (nothing of the scheduler's own)."""

from pathlib import Path

#: Where the shipped pretrained LDWP model lives (see models/pretrained/README.md). Defined here,
#: free of torch, so that the CLI can tell whether a model ships without importing it.
PRETRAINED_LDWP = Path(__file__).resolve().parent / "pretrained" / "ldwp"
#: Where the shipped case recogniser of the ``auto`` scheduler lives (plain JSON, no torch).
PRETRAINED_RECOGNISER = Path(__file__).resolve().parent / "pretrained" / "recogniser"
#: Where the shipped parameters of the learned placer ``iawp-rl`` live (``rlsched train --stage 2``).
PRETRAINED_IAWP_RL = Path(__file__).resolve().parent / "pretrained" / "iawp-rl"
