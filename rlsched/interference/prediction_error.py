"""How far a placer's interference predictions are from the co-runs it sees finish, per GPU model.

An interference-aware placer predicts each GPU subtask's speed beside its co-runners; when the
subtask finishes, the executor reports the speed it ran at. :class:`PredictionErrors` keeps, per GPU
model, an EMA of ``|log(measured / predicted)|`` and says which models are over a line, so that the
placer can stop trusting its predictions there (``IawpPlacer(fallback=E)``).
"""

from __future__ import annotations

import math

#: EMA weight of one co-run's error: about the last 20 co-runs count.
ERROR_EMA = 0.05
#: Co-runs of a GPU model observed before its error is judged.
ERROR_MIN_RUNS = 20


class PredictionErrors:
    """Per GPU model: the EMA of the co-runs' prediction error and how many were seen.

    :param line: a model whose EMA is over this (after :data:`ERROR_MIN_RUNS` co-runs) is
        distrusted; 0 = none ever is.
    """

    def __init__(self, line: float) -> None:
        self.line = line
        self._error: dict[str, float] = {}
        self._runs: dict[str, int] = {}
        #: The models over the line now (kept up to date, so the placer's check is a set lookup).
        self.distrusted_models: set[str] = set()

    def clear(self) -> None:
        """Forget every observation."""
        self._error.clear()
        self._runs.clear()
        self.distrusted_models.clear()

    def track(self, device: str, ratio: float) -> None:
        """Fold one co-run into ``device``'s EMA.

        :param ratio: the measured speed over the predicted one.
        """
        err = abs(math.log(max(ratio, 1e-9)))
        old = self._error.get(device)
        self._error[device] = err if old is None else old + ERROR_EMA * (err - old)
        self._runs[device] = self._runs.get(device, 0) + 1
        if self.distrusted(device):
            self.distrusted_models.add(device)
        else:
            self.distrusted_models.discard(device)

    def distrusted(self, device: str) -> bool:
        """Whether ``device``'s predictions are over the line (never when it is 0)."""
        return (
            self.line > 0.0
            and self._runs.get(device, 0) >= ERROR_MIN_RUNS
            and self._error[device] > self.line
        )

    def report(self) -> dict[str, dict[str, float | int | bool]]:
        """Per GPU model: the error (EMA), the co-runs seen, and whether it is distrusted."""
        return {
            d: {"error": round(e, 4), "co_runs": self._runs[d], "fallback": self.distrusted(d)}
            for d, e in sorted(self._error.items())
        }
