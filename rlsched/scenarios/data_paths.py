"""The data files a scenario names: ``${RLSCHED_DATA}`` and paths relative to the scenario file.

``${RLSCHED_DATA}`` expands to the environment variable ``RLSCHED_DATA`` or, when it is unset, to
the data that ship with the package (``rlsched/data``: the Alibaba GPU v2023 trace files and
Gavel's co-location table, each with its licence; :func:`find_data_dir`). A relative path starts
at the scenario file's folder.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from rlsched.config_reader import ConfigReader

#: Environment variable naming a data folder that overrides the packaged one (``rlsched/data``).
DATA_ENV = "RLSCHED_DATA"

_TRACE_DIR = "${RLSCHED_DATA}/traces/alibaba-gpu-v2023"
#: ``workload.alibaba.node_csv`` when not given: the packaged trace's node list.
DEFAULT_NODE_CSV = f"{_TRACE_DIR}/openb_node_list_gpu_node.csv"
#: ``workload.alibaba.pod_csv`` when not given: the packaged trace's pods.
DEFAULT_POD_CSV = f"{_TRACE_DIR}/openb_pod_list_default.csv"

_VAR = re.compile(r"\$\{([^}]*)\}")


def packaged_data_dir() -> Path:
    """The data shipped with the package (``rlsched/data``; ``PROVENANCE.md`` there says where each
    file comes from and under which licence)."""
    return Path(__file__).resolve().parent.parent / "data"


def find_data_dir() -> Path:
    """The data folder that ``${RLSCHED_DATA}`` stands for: ``$RLSCHED_DATA`` when set (an
    override, e.g. a newer copy of the trace), else :func:`packaged_data_dir`."""
    env = os.environ.get(DATA_ENV)
    return Path(env).expanduser() if env else packaged_data_dir()


def _expand(r: ConfigReader, field: str, raw: str) -> str:
    """Replace ``${RLSCHED_DATA}`` (the only variable) by the data folder."""

    def sub(m: re.Match[str]) -> str:
        if m.group(1) != DATA_ENV:
            raise r.error(field, f"a path whose only variable is ${{{DATA_ENV}}}", raw)
        return str(find_data_dir())

    return _VAR.sub(sub, raw)


def data_file(r: ConfigReader, field: str, raw: str, folder: Path) -> str:
    """An existing file named in a scenario, as a normalised path.

    :param r: the scenario's reader (its errors).
    :param field: the field that names the file.
    :param raw: the path as written (``${RLSCHED_DATA}`` expanded here).
    :param folder: where relative paths start: the scenario file's folder.
    :raises ScenarioError: another variable than ``${RLSCHED_DATA}``, or no such file.
    """
    path = Path(_expand(r, field, raw)).expanduser()
    if not path.is_absolute():
        path = folder / path
    path = Path(os.path.normpath(path))
    if not path.is_file():
        raise r.error(field, "an existing file", str(path))
    return str(path)
