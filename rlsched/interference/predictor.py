"""Learned co-location interference: what the IAWP placer asks before sharing a GPU.

Measurements are rows of a co-location CSV (ARCHITECTURE.md section 7)::

    device,kind,partner,norm_throughput
    v100,ResNet-18 (batch size 32),A3C,0.80

the throughput of ``kind`` while sharing ``device`` with ``partner``, divided by its solo
throughput there; ``0`` means the pair cannot share the device. :class:`InterferencePredictor`
learns them sparsely and predicts every triple, including pairs never measured:

- ``ncf`` — NeuMF (:class:`models.interference.neumf.NeuMF`, an average of three trained with different
  weight decay) with side information: kinds parsed into model family and batch size
  (``"ResNet-18 (batch size 32)"``) or, for the simulator's built-in kinds, their nominal cost
  model; devices from the public specs of :data:`rlsched.hardware.CATALOG`. With those it can
  also answer for a kind of a known family at a new batch size, or for a device of the catalog
  it has never measured (cold start; an extrapolation from the devices it knows).
- ``svd`` — biased matrix factorisation trained by SGD (Paragon/Quasar): rows (device, kind),
  columns partner, rank 4, with global, device, kind, partner and per-device kind and partner
  biases (an average of three over L2 strengths). Rows-as-(device, kind) against Quasar's
  rows-as-kind with (device, partner) columns made no difference on validation splits.
- ``mean`` — the kind's mean throughput on the device.

Both learned methods also learn feasibility from each observed row read the other way round:
"cannot share" is a property of the pair.

Device names match case-insensitively, and a name the model knows covers the catalog models it
stands for: a model fitted on ``v100`` answers for ``V100M16`` and ``V100M32`` (see
:func:`rlsched.hardware.device_models`).

A fitted predictor saves as a checkpoint directory (:mod:`models.checkpoint`: ``weights.pt``, a
torch state_dict loaded with ``weights_only=True``, and ``meta.json`` with the vocabularies,
hyper-parameters and the weights' sha256).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from models.checkpoint import META, CheckpointError, load_checkpoint, save_checkpoint
from models.interference import inference
from models.interference.ensemble import Ensemble, Model, build
from models.interference.mean_model import MeanModel
from models.interference.online import online_update, resize_counts, usage
from models.interference.rows import Rows
from models.interference.threads import one_thread
from models.interference.training import NetTrainConfig, train
from rlsched.hardware import device_models
from rlsched.interference.fit_options import FitOptions
from rlsched.interference.measurements import (
    ColocationData,
)
from rlsched.interference.side_features import (
    DEVICE_DIM,
    device_features,
    family_of,
    kind_name_features,
)
from rlsched.workloads import KINDS

#: Version of the side-feature encoding below; a model saved with another one is refused.
FEATURE_VERSION = 1
#: ``format`` field of an interference checkpoint's meta.json.
FORMAT = "rlsched-interference"
METHODS = ("ncf", "svd", "mean")
#: Prefix of the sample-count tensors stored with the weights.
COUNTS = "counts."

# --- the predictor --------------------------------------------------------------------------------


class InterferencePredictor:
    """A fitted interference model with its vocabularies; see the module docstring.

    Build one with :func:`fit_interference` or :meth:`load`.

    :param method: ``"ncf"``, ``"svd"`` or ``"mean"``.
    :param model: the torch model.
    :param kinds: kind vocabulary (index order of the model).
    :param devices: device vocabulary (lower-case).
    :param families: family vocabulary of the kind side features.
    :param y_max: the largest throughput a prediction may take.
    :param info: JSON-able facts kept with the model (training options, cold-start support).
    """

    def __init__(
        self,
        method: str,
        model: Model,
        kinds: Sequence[str],
        devices: Sequence[str],
        families: Sequence[str],
        y_max: float,
        info: dict[str, Any] | None = None,
    ) -> None:
        self.method = method
        self.model = model
        self.kinds = list(kinds)
        self.devices = [d.lower() for d in devices]
        self.families = list(families)
        self.y_max = float(y_max)
        self.info = dict(info or {})
        #: Samples each id-table cell has learnt from (:func:`models.interference.online.usage`).
        self.counts: dict[str, torch.Tensor] = {}
        self._kind_ix = {k: i for i, k in enumerate(self.kinds)}
        self._dev_ix = {d: i for i, d in enumerate(self.devices)}
        self.kind_x = kind_name_features(self.kinds, self.families)
        self.device_x = device_features(self.devices)
        self._resolved: dict[str, int] = {}

    # ---- names -> indices ------------------------------------------------------------------------
    def covers(self, device: str) -> bool:
        """Whether ``device`` (a catalog model) is in the model's vocabulary, or covered by a
        device that is (``V100M16`` by ``v100``): learnt from measurements, not cold-started."""
        return self._device_index(device) >= 0

    def _device_index(self, name: str) -> int:
        """Index of the vocabulary device that ``name`` is, or covers it (``V100M16`` -> ``v100``);
        -1 if none."""
        hit = self._resolved.get(name)
        if hit is not None:
            return hit
        i = self._dev_ix.get(name.strip().lower(), -1)
        if i < 0:
            want = device_models(name)
            cover = [
                (len(device_models(d)), j)
                for j, d in enumerate(self.devices)
                if want and want <= device_models(d)
            ]
            i = min(cover)[1] if cover else -1
        self._resolved[name] = i
        return i

    def _cold_kind(self, name: str) -> bool:
        """Whether ``ncf`` can answer for a kind outside its vocabulary from side features."""
        if self.method != "ncf":
            return False
        if family_of(name) in self.families and family_of(name) != name:
            return True
        return name in KINDS and bool(self.info.get("builtin_kinds"))

    def _cold_device(self, name: str) -> bool:
        """Whether ``ncf`` can answer for a device outside its vocabulary: it has catalog specs
        and the model learnt from at least two devices with specs (one cannot show how specs
        matter)."""
        return self.method == "ncf" and bool(device_models(name)) and self.info.get("spec_devices", 0) >= 2

    def unknown(self, data: ColocationData) -> list[str]:
        """Kinds and devices of ``data`` this model cannot predict (sorted; empty when every row,
        cold starts included, is supported).

        :param data: rows to check (``y`` is ignored).
        """
        bad = {k for k in {*data.kind, *data.partner} if k not in self._kind_ix and not self._cold_kind(k)}
        bad |= {d for d in set(data.device) if self._device_index(d) < 0 and not self._cold_device(d)}
        return sorted(bad)

    def _rows(self, device: Sequence[str], kind: Sequence[str], partner: Sequence[str]) -> Rows:
        """Model inputs for name columns; cold-start entities get index -1 and computed features."""
        data = ColocationData(list(device), list(kind), list(partner), np.zeros(len(device)))
        bad = self.unknown(data)
        if bad:
            raise ValueError(f"the {self.method} interference model cannot predict: {', '.join(bad)}")
        k_ix, k_x = self._encode(data.kind, self._kind_ix.get, self.kind_x, self._kinds_x)
        p_ix, p_x = self._encode(data.partner, self._kind_ix.get, self.kind_x, self._kinds_x)
        d_ix, d_x = self._encode(data.device, self._device_index, self.device_x, device_features)

        def t(a: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(a)

        return Rows(t(k_ix), t(p_ix), t(d_ix), t(data.y.astype(np.float32)), t(k_x), t(p_x), t(d_x))

    def _kinds_x(self, names: Sequence[str]) -> np.ndarray:
        return kind_name_features(names, self.families)

    @staticmethod
    def _encode(
        names: Sequence[str],
        index: Callable[[str], int | None],
        table: np.ndarray,
        features: Callable[[Sequence[str]], np.ndarray],
    ) -> tuple[np.ndarray, np.ndarray]:
        """(indices, feature rows) for a column of names, computed once per distinct name; -1 and
        freshly computed features for names outside the vocabulary."""
        uniq, inv = np.unique(np.asarray(names, dtype=object), return_inverse=True)
        found = [index(str(u)) for u in uniq]
        ix = np.array([-1 if i is None else i for i in found], dtype=np.int64)
        x = np.zeros((len(uniq), table.shape[1]), dtype=np.float32)
        known = ix >= 0
        x[known] = table[ix[known]]
        if not known.all():
            x[~known] = features([str(u) for u in uniq[~known]])
        return ix[inv], x[inv]

    # ---- the public interface ----------------------------------------------------------------------
    def predict(self, device: Sequence[str], kind: Sequence[str], partner: Sequence[str]) -> np.ndarray:
        """Predicted normalised throughput of ``kind`` next to ``partner`` on ``device``, per row
        (float64); 0 where the pair is predicted unable to share.

        :param device: device names (vocabulary names, catalog models they cover, or cold starts).
        :param kind: kinds.
        :param partner: partner kinds.
        :raises ValueError: naming the kinds/devices it cannot predict (see :meth:`unknown`).
        """
        if len(device) == 0:
            return np.zeros(0)
        rows = self._rows(device, kind, partner)
        with one_thread():
            return inference.predict(self.model, rows, self.y_max)

    def predict_spread(
        self, device: Sequence[str], kind: Sequence[str], partner: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`predict`'s predictions with their uncertainty: the standard deviation over the
        ensemble's members (0 for the ``mean`` model, which has one).

        The members are fitted on the same rows with regularisation strengths an order of
        magnitude apart (:class:`FitOptions`) and their own initialisations. Where the data pin a
        triple down they agree; where a prediction leans on the regulariser and on what other
        kinds and devices suggest (a sparsely profiled GPU model, an unmeasured pair) they part.
        (Members trained on bootstrap resamples instead ranked the errors no better on the
        simulator's built-ins: BENCHMARKS.md, "An interference model that knows where it is wrong".)

        :returns: (predictions, spreads), float64 per row.
        :raises ValueError: as :meth:`predict`.
        """
        if len(device) == 0:
            return np.zeros(0), np.zeros(0)
        rows = self._rows(device, kind, partner)
        with one_thread():
            mean = inference.predict(self.model, rows, self.y_max)
            members = inference.member_predictions(self.model, rows, self.y_max)
        return mean, members.std(axis=0)

    def update(
        self, data: ColocationData, steps: int = 20, lr: float = 0.5, tables_only: bool = True
    ) -> None:
        """Keep learning from new samples with plain SGD (``mean``: add them to the counts).

        Kinds and devices not in the vocabulary join it first (a device the model already covers,
        such as ``V100M16`` for ``v100``, does not); a new device starts from its side features
        and learns its own embeddings and biases from the few samples it has.

        By default only the per-entity parameters (embeddings, factors, biases) learn: the
        interaction network was fitted with Adam on all the data, and plain SGD on a few dozen
        rows moves its weights erratically (on the Gavel new-device split, updating everything
        left errors two to three times higher than updating the tables alone).

        :param data: new measurements.
        :param steps: SGD steps, each on a mini-batch of up to 64 of the rows.
        :param lr: SGD learning rate (of a mean-reduced loss: a kind seen in 2 of 64 rows
            moves by ``lr * 2/64`` of its gradient, hence the large default).
        :param tables_only: learn only the per-entity parameters.
        """
        if len(data) == 0:
            return
        self._extend(data)
        rows = self._rows(data.device, data.kind, data.partner)
        rows.y = torch.from_numpy(data.y.astype(np.float32))
        self.y_max = max(self.y_max, float(data.y.max()))
        if isinstance(self.model, MeanModel):
            train(self.model, rows, NetTrainConfig())
            self.info["n_seen"] = int(self.info.get("n_seen", 0)) + len(rows)
            return
        seen = int(self.info.get("n_seen", len(rows))) + len(rows)
        updates = int(self.info.get("updates", 0))
        base = NetTrainConfig(**self.info.get("train", {}))
        with one_thread():
            online_update(self.model, rows, base, self.counts, steps, lr, tables_only, seen, updates)
        self._count(rows)
        self.info["updates"] = updates + 1
        self.info["n_seen"] = seen

    def _extend(self, data: ColocationData) -> None:
        """Add the kinds and devices of ``data`` that the vocabulary lacks."""
        new_k = sorted({*data.kind, *data.partner} - set(self._kind_ix))
        new_d = sorted({d.lower() for d in data.device if self._device_index(d) < 0})
        if not (new_k or new_d):
            return
        self.model.grow(kinds=len(new_k), devices=len(new_d))
        self.counts = resize_counts(self.model, self.counts)
        self.kinds += new_k
        self.devices += new_d
        self._kind_ix = {k: i for i, k in enumerate(self.kinds)}
        self._dev_ix = {d: i for i, d in enumerate(self.devices)}
        self.kind_x = kind_name_features(self.kinds, self.families)
        self.device_x = device_features(self.devices)
        self._resolved.clear()
        if any(k in KINDS for k in new_k):
            self.info["builtin_kinds"] = True

    def _count(self, rows: Rows) -> None:
        """Add ``rows`` to the per-cell sample counts."""
        new = usage(self.model, rows)
        self.counts = {k: self.counts[k] + v if k in self.counts else v for k, v in new.items()}

    def digest(self) -> str:
        """sha256 of the model's current parameters and sample counts (its version as it learns)."""
        h = hashlib.sha256()
        state = {**self.model.state_dict(), **{COUNTS + k: v for k, v in self.counts.items()}}
        for k in sorted(state):
            h.update(k.encode())
            h.update(state[k].detach().cpu().numpy().tobytes())
        return h.hexdigest()

    def save(self, path: str | Path) -> None:
        """Write a checkpoint directory (``weights.pt`` + ``meta.json`` with its sha256).

        :param path: the directory (created if missing).
        """
        meta = {
            "format": FORMAT,
            "feature_version": FEATURE_VERSION,
            "method": self.method,
            "model_class": type(self.model).__name__,
            "model_config": self.model.config(),
            "kinds": self.kinds,
            "devices": self.devices,
            "families": self.families,
            "y_max": self.y_max,
            "info": self.info,
        }
        state = {**self.model.state_dict(), **{COUNTS + k: v for k, v in self.counts.items()}}
        save_checkpoint(path, state, json.loads(json.dumps(meta)))

    @classmethod
    def load(cls, path: str | Path) -> InterferencePredictor:
        """Load a checkpoint written by :meth:`save`, verifying its checksum.

        :param path: the checkpoint directory.
        :raises CheckpointError: naming the file when it is missing, corrupt, or not an
            interference model.
        """
        meta_path = Path(path) / META
        try:
            fmt = json.loads(meta_path.read_text(encoding="utf-8")).get("format")
        except (OSError, ValueError, AttributeError):  # ValueError: bad JSON or not UTF-8
            fmt = FORMAT  # let load_checkpoint report what is wrong
        if fmt != FORMAT:
            raise CheckpointError(meta_path, "format", f"{FORMAT!r} (an interference model)", fmt)
        state, meta = load_checkpoint(
            path, FEATURE_VERSION, retrain="rlsched interference fit", kind="interference"
        )
        try:
            model = build(meta["model_class"], meta["model_config"])
            counts = {k[len(COUNTS) :]: v for k, v in state.items() if k.startswith(COUNTS)}
            model.load_state_dict({k: v for k, v in state.items() if not k.startswith(COUNTS)})
            pred = cls(
                meta["method"],
                model,
                meta["kinds"],
                meta["devices"],
                meta["families"],
                meta["y_max"],
                meta["info"],
            )
        except (KeyError, TypeError, ValueError, RuntimeError) as e:
            raise CheckpointError(
                meta_path, "<file>", "a consistent interference checkpoint", str(e)
            ) from None
        model.eval()
        pred.counts = counts
        return pred


# --- fitting and evaluation -----------------------------------------------------------------------


def fit_interference(
    data: ColocationData, method: str = "ncf", seed: int = 0, *, options: FitOptions | None = None
) -> InterferencePredictor:
    """Fit an interference model on all of ``data``.

    :param data: measurements.
    :param method: ``"ncf"``, ``"svd"`` or ``"mean"``.
    :param seed: initialisation and shuffling seed.
    :param options: hyper-parameters (default: :class:`FitOptions`).
    :raises ValueError: for an unknown method or empty data.
    """
    if method not in METHODS:
        raise ValueError(f"unknown interference method {method!r}; known: {', '.join(METHODS)}")
    if len(data) == 0:
        raise ValueError("no co-location rows to fit")
    opt = options or FitOptions()
    kinds = sorted({*data.kind, *data.partner})
    devices = sorted({d.lower() for d in data.device})
    families = sorted({family_of(k) for k in kinds})
    y_max = max(float(data.y.max()), 1.0)
    info: dict[str, Any] = {
        "n_seen": len(data),
        "builtin_kinds": any(k in KINDS for k in kinds),
        "spec_devices": int(device_features(devices)[:, 0].sum()),
        "seed": seed,
    }
    model: Model = MeanModel(len(kinds), len(devices))
    pred = InterferencePredictor(method, model, kinds, devices, families, y_max, info)
    rows = pred._rows(data.device, data.kind, data.partner)
    rows.y = torch.from_numpy(data.y.astype(np.float32))
    if method == "mean":
        train(model, rows, NetTrainConfig())
        return pred
    if opt.mirror_feasibility:
        rows = rows.cat(_unobserved_mirrors(rows))
    if method == "ncf":
        kind_dim = rows.kind_x.shape[1] if rows.kind_x is not None else 0
        sizes = {"kind_dim": kind_dim, "device_dim": DEVICE_DIM, **opt.ncf}
        base, members = opt.ncf_train, opt.ncf_members
    else:
        sizes, base, members = dict(opt.svd), opt.svd_train, opt.svd_members
    pred.model = _ensemble(
        "NeuMF" if method == "ncf" else "BiasedMF", len(kinds), len(devices), sizes, base, members, rows, seed
    )
    pred._count(rows)
    pred.info["train"] = asdict(base)
    pred.info["members"] = members
    return pred


def _unobserved_mirrors(rows: Rows) -> Rows:
    """Feasibility-only rows (d, b, a) for observed (d, a, b) whose mirror is not observed."""
    n = int(max(rows.kind.max(), rows.partner.max())) + 1
    d, k, p = (x.numpy().astype(np.int64) for x in (rows.device, rows.kind, rows.partner))
    seen = (d * n + k) * n + p
    keep = ~np.isin((d * n + p) * n + k, seen) & (k != p)
    # One mirror per distinct pair, even when the pair was measured several times.
    _, first = np.unique(((d * n + p) * n + k)[keep], return_index=True)
    return rows.take(torch.from_numpy(np.flatnonzero(keep)[first])).mirrored()


def _ensemble(
    cls: str,
    n_kinds: int,
    n_devices: int,
    args: dict[str, Any],
    base: NetTrainConfig,
    members: list[dict[str, Any]],
    rows: Rows,
    seed: int,
) -> Ensemble:
    """An ensemble of ``cls`` models, one per ``members`` entry (``base`` updated by it), each
    trained on all ``rows`` from its own initialisation."""
    members = members or [{}]
    specs = [
        {
            "class": cls,
            "config": {"n_kinds": n_kinds, "n_devices": n_devices, **args, "seed": 1000 * i + seed},
        }
        for i in range(len(members))
    ]
    model = Ensemble(specs)
    with one_thread():
        for i, member in enumerate(model.parts):
            train(member, rows, replace(base, **members[i]), 1000 * i + seed)
    return model


def evaluate(pred: InterferencePredictor, data: ColocationData) -> dict[str, float | int]:
    """Error of ``pred`` on ``data``.

    :param pred: a fitted predictor.
    :param data: measurements to score against.
    :returns: ``mae``, ``rmse``, ``n`` and ``feasible_accuracy`` (share of rows whose
        can-share / cannot-share call is right).
    :raises ValueError: naming kinds/devices the model cannot predict.
    """
    if len(data) == 0:
        raise ValueError("no rows to evaluate")
    p = pred.predict(data.device, data.kind, data.partner)
    err = p - data.y
    return {
        "mae": float(np.abs(err).mean()),
        "rmse": float(np.sqrt((err**2).mean())),
        "n": len(data),
        "feasible_accuracy": float(((p > 0) == (data.y > 0)).mean()),
    }
