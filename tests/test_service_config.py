"""The service's config file: the operator guide's example loads as copied; keys that the chosen
backend would ignore are errors naming them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rlsched.config_reader import ConfigError
from runtime.service.config import _TENANT, _TOP, hash_token, load_service_config
from runtime.service.models import build_scheduler

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_config() -> str:
    """The ``service.toml`` block of the operator guide."""
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```toml\n(# service\.toml.*?)```", text, flags=re.S)
    assert len(blocks) == 1
    return blocks[0]


def test_the_operator_guide_config_loads_as_copied(tmp_path: Path) -> None:
    path = tmp_path / "service.toml"
    path.write_text(readme_config().replace('token_sha256 = "…"', f'token_sha256 = "{hash_token("t")}"'))
    cfg = load_service_config(path)
    assert cfg.backend == "local" and cfg.cluster is None and cfg.ray_address is None
    build_scheduler(cfg.scheduler, cfg.selector_model, cfg.placer_model, cfg.source, cfg.active_profiling)
    # Every key the example shows, commented or not, is one the service reads.
    shown = set(re.findall(r"^#? ?([a-z_]+) = ", readme_config(), flags=re.M))
    assert shown <= set(_TOP) | set(_TENANT)


@pytest.mark.parametrize("key", ["ray_address", "ray_gpu_model"])
def test_a_ray_key_with_the_local_backend_is_an_error_naming_it(tmp_path: Path, key: str) -> None:
    path = tmp_path / "service.toml"
    path.write_text(
        f'backend = "local"\n{key} = "auto"\n[[tenants]]\nname = "a"\ntoken_sha256 = "{hash_token("t")}"\n'
    )
    with pytest.raises(ConfigError) as e:
        load_service_config(path)
    assert e.value.field == key and "ray" in str(e.value)


@pytest.mark.parametrize(("value", "ok"), [("0", 0.0), ("60", 60.0), ("30", None), ("-1", None)])
def test_finished_retention_is_0_or_at_least_a_minute(tmp_path: Path, value: str, ok: float | None) -> None:
    """A retention shorter than a minute would remove a result before a polling client reads it."""
    path = tmp_path / "service.toml"
    path.write_text(
        f'finished_retention_s = {value}\n[[tenants]]\nname = "a"\ntoken_sha256 = "{hash_token("t")}"\n'
    )
    if ok is not None:
        assert load_service_config(path).finished_retention_s == ok
        return
    with pytest.raises(ConfigError) as e:
        load_service_config(path)
    assert e.value.field == "finished_retention_s"


def _tenants(tmp_path: Path, *tokens: str) -> Path:
    path = tmp_path / "service.toml"
    path.write_text(
        "".join(f'[[tenants]]\nname = "t{i}"\ntoken_sha256 = {v}\n' for i, v in enumerate(tokens))
    )
    return path


def test_a_tenant_may_have_several_tokens_while_its_clients_move(tmp_path: Path) -> None:
    new, old = hash_token("new"), hash_token("old")
    cfg = load_service_config(_tenants(tmp_path, f'["{new}", "{old.upper()}"]', f'"{hash_token("b")}"'))
    assert cfg.tenants[0].digests == (new, old)
    assert [t.name if t else None for t in map(cfg.tenant_for, ("new", "old", "b", "x"))] == [
        "t0",
        "t0",
        "t1",
        None,
    ]


@pytest.mark.parametrize(
    ("tokens", "field"),
    [
        (("[]",), "tenants[0].token_sha256"),
        (('["abc"]',), "tenants[0].token_sha256"),
        ((f'["{hash_token("a")}", 3]',), "tenants[0].token_sha256"),
        (("[" + ", ".join(f'"{hash_token(str(i))}"' for i in range(5)) + "]",), "tenants[0].token_sha256"),
        ((f'["{hash_token("a")}", "{hash_token("a")}"]',), "tenants"),
        ((f'["{hash_token("a")}", "{hash_token("b")}"]', f'"{hash_token("b")}"'), "tenants"),
    ],
)
def test_a_bad_token_list_names_the_field(tmp_path: Path, tokens: tuple[str, ...], field: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_service_config(_tenants(tmp_path, *tokens))
    assert e.value.field == field
