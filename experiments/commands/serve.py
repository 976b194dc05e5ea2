"""``rlsched serve``: the live scheduling service."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from experiments.commands import values
from experiments.commands.command import Command
from experiments.commands.exit_codes import exit_help
from experiments.commands.flags import flag
from rlsched.errors import InputError

if TYPE_CHECKING:
    from runtime.service.config import ServiceConfig


@dataclass(kw_only=True)
class ServeArgs:
    """Options of ``rlsched serve``; each one given overrides the config file's key of its name.

    :param config: service config file (TOML: tenants, scheduler, queue)
    :param host: address to bind (default: the config's, else 127.0.0.1)
    :param port: TCP port (default: the config's, else 8470)
    :param db: SQLite queue file (default: the config's)
    :param scheduler: SELECTOR+PLACER, or auto (recognises the case from the fleet and its first
        tasks and runs the pair it wants) (default: the config's, else auto)
    :param backend: cluster backend: node agents in this process, or one per Ray node (default: the
        config's, else local)
    :param ray_address: Ray cluster to join with --backend ray (default: the config's; none: start
        a local Ray)
    :param selector_model: LDWP checkpoint folder (default: the config's, else shipped)
    :param placer_model: iawp-rl checkpoint folder (default: the config's, else shipped)
    :param recogniser_model: auto's recogniser folder (rlsched fit-recogniser; default: the
        config's, else shipped)
    :param log_level: service log level (default: the config's, else info: a line per request,
        recovery, shutdown)
    :param log_format: service log format: text, or json (one object per line, for a log
        collector) (default: the config's, else text)
    :param interference_model: interference model: a folder of 'interference fit' or a co-location
        CSV of 'profile' (default: the config's, else surveyed on the cluster at start)
    :param tls_certfile: PEM certificate to serve HTTPS with (default: the config's; none: plain
        HTTP)
    :param tls_keyfile: its PEM private key (default: the config's)
    :param check: check the config as a start would (every model loaded, the learned state read)
        and exit 0 without serving; it opens neither the port nor the queue, so it can run beside
        the service it would replace
    """

    config: str = flag(path=True)
    host: str | None = None
    port: int | None = flag(None, parse=values.int_at_least(1, 65535))
    db: str | None = flag(None, path=True)
    scheduler: str | None = None
    backend: str | None = flag(None, choices=("local", "ray"))
    ray_address: str | None = None
    selector_model: str | None = flag(None, path=True)
    placer_model: str | None = flag(None, path=True)
    recogniser_model: str | None = flag(None, path=True)
    log_level: str | None = flag(None, choices=("debug", "info", "warning", "error"))
    log_format: str | None = flag(None, choices=("text", "json"))
    interference_model: str | None = flag(None, path=True)
    tls_certfile: str | None = flag(None, path=True)
    tls_keyfile: str | None = flag(None, path=True)
    check: bool = False


def run(args: ServeArgs, argv: Sequence[str]) -> int:
    """Read the config, apply the flags, serve until stopped."""
    from runtime.service.extra import require_serve_extra

    require_serve_extra("rlsched serve")
    from experiments import inputs

    cfg = _config(args)  # before the server's imports: a bad file fails fast
    if args.ray_address is not None and cfg.backend != "ray":
        raise InputError("--ray-address", "value", "a flag of --backend ray only", args.ray_address)
    inputs.live_schedulers(
        cfg.scheduler, [], "--scheduler" if args.scheduler else f"{args.config}: scheduler"
    )
    from runtime.service.preflight import check_service_config

    # Models, cluster file, queue file, address, state_dir: refused before torch is imported.
    check_service_config(cfg, frozenset(_given(args)))
    if args.check:
        from runtime.service.start_check import check_loads

        print(f"rlsched serve: {args.config}: ready to serve ({check_loads(cfg)})")
        return 0

    scheme = "https" if cfg.tls_certfile else "http"

    from runtime.service.log_format import configure, line
    from runtime.service.server import serve

    def announce(scheduler: str) -> None:  # only once it listens: one that could not start says why
        banner = (
            f"rlsched serve: {scheduler} on {scheme}://{cfg.host}:{cfg.port} "
            f"({cfg.backend} cluster, queue {cfg.db})"
        )
        print(banner if cfg.log_format == "text" else line("json", banner), file=sys.stderr)

    configure(cfg.log_level, cfg.log_format)
    # A queue another service holds: exit 2; a port in use: exit 4.
    serve(cfg, announce, reread=lambda: _config(args))
    return 0


def _config(args: ServeArgs) -> ServiceConfig:
    """The config file with the flags given over it (at start, and again on a reload)."""
    from runtime.service.config import load_service_config

    return dataclasses.replace(load_service_config(args.config), **_given(args))


def _given(args: ServeArgs) -> dict[str, Any]:
    """The config keys the flags give over the file (an error about one names the flag)."""
    from runtime.service.config import ServiceConfig

    keys = {f.name for f in dataclasses.fields(ServiceConfig)} - {"config"}
    return {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(args)
        if f.name in keys and getattr(args, f.name) is not None
    }


COMMAND = Command(
    "serve",
    "run the live scheduling service (HTTP API, tenants, durable queue)",
    ServeArgs,
    run,
    exit_help(unavailable="the port is in use by another process"),
)
