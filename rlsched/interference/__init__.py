"""Interference: the co-location and solo measurement files, the survey a placer calibrates
from (taken by the world's instrument), the learned co-location predictor (NCF) and the kinds'
resource profiles.

Names are imported on first use (PEP 562): the predictor brings in torch, which reading a
measurement file or a scenario does without.
"""

from __future__ import annotations

from rlsched.lazy import lazy_dir, lazy_exports

_EXPORTS = {
    "ColocationData": "rlsched.interference.measurements",
    "MeasurementError": "rlsched.interference.measurements",
    "read_colocation_csv": "rlsched.interference.measurements",
    "write_colocation_csv": "rlsched.interference.measurements",
    "read_solo_csv": "rlsched.interference.measurements",
    "write_solo_csv": "rlsched.interference.measurements",
    "ProfilingInstrument": "rlsched.interference.instrument",
    "ObservingPlacer": "rlsched.interference.calibration",
    "CalibratingPlacer": "rlsched.interference.calibration",
    "Survey": "rlsched.interference.calibration",
    "SurveyRequest": "rlsched.interference.calibration",
    "run_survey": "rlsched.interference.calibration",
    "InterferencePredictor": "rlsched.interference.predictor",
    "fit_interference": "rlsched.interference.predictor",
    "ProfileSamples": "rlsched.interference.kind_profiles",
    "complete_profiles": "rlsched.interference.kind_profiles",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
__dir__ = lazy_dir(__name__, _EXPORTS)
