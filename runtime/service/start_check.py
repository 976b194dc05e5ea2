"""``rlsched serve --check``: what a start loads, loaded, without serving (the preflight,
:mod:`runtime.service.preflight`, runs first)."""

from __future__ import annotations

from runtime.cluster.config import default_live_cluster
from runtime.cluster.config_io import load_live_cluster
from runtime.cluster.ray_address import ray_address
from runtime.service.config import ServiceConfig
from runtime.service.learned_state import LearnedState
from runtime.service.models import build_scheduler, load_interference
from runtime.service.retention import span_text


def check_loads(cfg: ServiceConfig) -> str:
    """What a start would load, loaded (``rlsched serve --check``): the scheduler with its models
    (feature versions and weights), the configured interference model, the learned state of
    ``state_dir`` and the live cluster; not the port, not the queue (a running service holds it).

    :returns: what the service would run, in a line.
    :raises InputError: naming the key of what cannot be loaded.
    """
    where = cfg.source
    _, versions = build_scheduler(
        cfg.scheduler,
        cfg.selector_model,
        cfg.placer_model,
        where,
        cfg.active_profiling,
        cfg.prediction_fallback,
        cfg.recogniser_model,
    )
    if cfg.interference_model is not None:
        load_interference(cfg.interference_model, cfg.scheduler, where)
    learned = LearnedState(cfg.state_dir).load_at_start(where)
    spec = default_live_cluster() if cfg.cluster is None else load_live_cluster(cfg.cluster)
    gpus = sum(len(n.gpus) for n in spec.nodes)
    models = ", ".join(f"{v.role} {v.source} {v.sha256[:12]}" for v in versions) or "no trained model"
    state = f"learned state v{learned.version}" if learned is not None else "no learned state yet"
    tenants = _counted(len(cfg.tenants), "tenant")
    scheme = "https" if cfg.tls_certfile else "http"
    kept = "for ever" if cfg.finished_retention_s <= 0 else span_text(cfg.finished_retention_s)
    return (
        f"scheduler {cfg.scheduler}; {models}; {state}; {tenants}; "
        f"{_counted(len(spec.nodes), 'node')}, {_counted(gpus, 'GPU')}{_on_ray(cfg)}; "
        f"{scheme}://{cfg.host}:{cfg.port}; queue {cfg.db}, finished tasks kept {kept}"
    )


def _counted(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _on_ray(cfg: ServiceConfig) -> str:
    """Where a Ray service's agents would run: ``--check`` does not join the cluster."""
    if cfg.backend != "ray":
        return ""
    address = ray_address(cfg.ray_address)
    where = f"the Ray cluster at {address}" if address is not None else "a local Ray it starts"
    return f" on {where} (not joined by --check)"
