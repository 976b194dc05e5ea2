"""``rlsched evaluate``: the report a user opens agrees with the results it was made from."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from experiments.cli import main
from experiments.report_stats import summarise
from models.checkpoint import write_meta
from rlsched.policies.ldwp import PRETRAINED
from rlsched.policies.registry import SELECTORS, register_selector

TINY = """name = "tiny"
seed = 1
[[cluster.nodes]]
name = "p4"
count = 2
cpu_cores = 4
host_mem_gib = 32
gpu_model = "P4"
gpu_count = 1
net_gbps = 10
[[cluster.nodes]]
name = "t4"
cpu_cores = 4
host_mem_gib = 32
gpu_model = "T4"
gpu_count = 2
net_gbps = 10
[workload]
tasks = 40
apps = { matmul = 1, fft = 1, kmeans = 1 }
[workload.arrival]
process = "poisson"
rate_per_min = 600
"""
PNG = b"\x89PNG\r\n\x1a\n"


class _Page(HTMLParser):
    """Images and tables of an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img":
            self.images.append(dict(attrs).get("src") or "")
        elif tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _md_tables(text: str) -> list[list[list[str]]]:
    tables: list[list[list[str]]] = []
    prev = False
    for line in text.splitlines():
        row = line.startswith("| ")
        if row and not prev:
            tables.append([])
        if row:
            tables[-1].append([c.strip() for c in line.strip("|").split(" | ")])
        elif line.startswith("|---"):
            row = True
        prev = row
    return tables


def _fmt(v: float | None, prec: int) -> str:
    return "–" if v is None else f"{v:.{prec}f}"


class Explodes:
    """A stage-1 policy that fails on its third decision (a scheduler bug, as users will write)."""

    name = "explodes"

    def reset(self, view: object, seed: int) -> None:
        self.n = 0

    def select(self, task: object, view: object, mask: np.ndarray) -> int:
        self.n += 1
        if self.n == 3:
            raise RuntimeError("boom on decision 3")
        return int(np.flatnonzero(mask)[0])


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("eval")
    (d / "tiny.toml").write_text(TINY)
    register_selector("explodes", Explodes)
    try:
        rc = main(
            [
                "evaluate",
                "--scenarios",
                str(d / "tiny.toml"),
                "--schedulers",
                "mct+mlsm,random+speedup,oracle+speedup,explodes+speedup",
                "--seeds",
                "2",
                "--jobs",
                "1",
                "--out",
                str(d / "out"),
            ]
        )
    finally:
        SELECTORS.pop("explodes")
    assert rc == 6  # the report is written, with holes: a script must be told
    return d / "out"


def test_every_file_is_written(report: Path) -> None:
    for name in ("results.json", "results.csv", "report.md", "report.html", "runs.jsonl"):
        assert (report / name).is_file(), name
    rows = json.loads((report / "results.json").read_text())["rows"]
    assert len(rows) == 4 * 2
    assert len((report / "results.csv").read_text().splitlines()) == 1 + 8
    assert len((report / "runs.jsonl").read_text().splitlines()) == 8
    # every metric of `simulate --json`, as the README says (throughput_per_min was missing)
    sim = json.loads(rlsched("simulate", "--scenario", "paper#20", "--json").stdout)
    ok = next(r for r in rows if r["status"] == "ok")
    assert set(sim) <= set(ok), set(sim) - set(ok)
    assert ok["rebalance"] is False  # how the run was made, beside what it measured
    assert ok["throughput_per_min"] == pytest.approx(ok["throughput"] * 60)


def test_failed_scheduler_is_reported_not_dropped(report: Path) -> None:
    rows = json.loads((report / "results.json").read_text())["rows"]
    bad = [r for r in rows if r["scheduler"] == "explodes+speedup"]
    assert [r["status"] for r in bad] == ["failed", "failed"]
    assert all("boom on decision 3" in r["error"] and r["throughput"] is None for r in bad)
    md = (report / "report.md").read_text()
    line = next(x for x in md.splitlines() if x.startswith("| explodes+speedup | 0/2"))
    assert "failed: RuntimeError: boom on decision 3" in line


def test_html_images_exist_and_numbers_match_results(report: Path) -> None:
    doc = json.loads((report / "results.json").read_text())
    rows = doc["rows"]
    page = _Page()
    page.feed((report / "report.html").read_text())
    assert len(page.images) >= 4
    for src in page.images:
        if src.startswith("data:image/png;base64,"):
            assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG)
        else:
            assert (report / src).read_bytes().startswith(PNG)
    md = (report / "report.md").read_text()
    for line in md.splitlines():
        if line.startswith("!["):
            assert (report / line.split("](")[1].rstrip(")")).read_bytes().startswith(PNG)
    # The table of every run, in both documents, is a rounding of results.json.
    html_runs = next(t for t in page.tables if t[0][:3] == ["scenario", "scheduler", "seed"])[1:]
    md_runs = next(t for t in _md_tables(md) if t[0][:3] == ["scenario", "scheduler", "seed"])[1:]
    assert html_runs == md_runs
    assert len(html_runs) == len(rows)
    for cells, r in zip(html_runs, rows, strict=True):
        thr = None if r["throughput"] is None else r["throughput"] * 60
        ub = None if r["bound_throughput_ub"] is None else r["bound_throughput_ub"] * 60
        assert cells[1:5] == [r["scheduler"], str(r["seed"]), r["status"], _fmt(thr, 3)]
        assert cells[5] == _fmt(r["latency_p95_s"], 3)
        assert cells[8] == _fmt(ub, 3)
        assert cells[9] == _fmt(r["frac_of_bound"], 4)
    # The scheduler table's means are those of results.json.
    table = next(t for t in page.tables if t[0][:2] == ["scheduler", "runs ok"])
    for cells in table[1:]:
        mine = [r for r in rows if r["scheduler"] == cells[0] and r["status"] == "ok"]
        if mine:
            s = summarise([r["throughput"] * 60 for r in mine])
            assert re.split(r" ± | \[", cells[2])[0] == f"{s.mean:.{3 if s.mean < 10 else 1}f}"


def _interval(cell: str) -> tuple[float, float] | None:
    """(low, high) of a ``m ± h`` or ``m [a, b]`` cell; ``None`` for a cell without one."""
    m = re.fullmatch(r"(-?[\d.]+) ± ([\d.]+)", cell)
    if m:
        return float(m[1]) - float(m[2]), float(m[1]) + float(m[2])
    m = re.fullmatch(r"-?[\d.]+ \[(-?[\d.]+), (-?[\d.]+)\]", cell)
    return (float(m[1]), float(m[2])) if m else None


def test_no_interval_leaves_its_metric_range_with_two_seeds(report: Path) -> None:
    page = _Page()
    page.feed((report / "report.html").read_text())
    table = next(t for t in page.tables if t[0][:2] == ["scheduler", "runs ok"])
    head = table[0]
    checked = 0
    for cells in table[1:]:
        for col, (lo, hi) in {
            "of bound": (0, 1),
            "GPU util": (0, 1),
            "load bal.": (0, 1),
            "p95 s": (0, None),
        }.items():
            iv = _interval(cells[head.index(col)])
            if iv is None:
                continue
            checked += 1
            assert iv[0] >= lo and (hi is None or iv[1] <= hi), (cells[0], col, iv)
    assert checked >= 8
    assert "range of the seeds" in (report / "report.md").read_text()


def test_report_states_command_seeds_revision_and_bound(report: Path) -> None:
    doc = json.loads((report / "results.json").read_text())
    meta = doc["meta"]
    assert meta["seeds"] == [20000, 20001]
    assert meta["command"].startswith("rlsched evaluate --scenarios")
    md = (report / "report.md").read_text()
    assert meta["command"] in md and meta["git_revision"] in md and "[20000, 20001]" in md
    # What a wheel install (no git) still says: the package and its shipped models.
    assert meta["version"].startswith("rlsched ") and "ldwp " in meta["version"] and meta["version"] in md
    assert "Offered load" in md
    for r in doc["rows"]:
        assert r["bound_throughput_ub"] > 0 and r["bound_offered_load"] > 0
        if r["status"] == "ok":
            assert r["within_bound"] is True
    # the scenario's regime, in the headroom section's words ("not arrival-bound" read as a
    # contradiction beside "binding: arrivals" just under capacity)
    loads = [r["bound_offered_load"] for r in doc["rows"]]
    regime = "**arrival-bound**" if sum(loads) / len(loads) < 0.8 else "has headroom"
    assert re.search(rf"Offered load [^(]+\({re.escape(regime)}\); capacity bound", md), md[:3000]


def test_the_clairvoyant_reference_is_marked_and_never_the_best(report: Path) -> None:
    rows = json.loads((report / "results.json").read_text())["rows"]
    assert {r["scheduler"] for r in rows if r["clairvoyant"]} == {"oracle+speedup"}
    md = _md_tables((report / "report.md").read_text())
    sched = next(t for t in md if t[0][:2] == ["scheduler", "runs ok"])
    col = sched[0].index("clairvoyant")
    assert {r[0]: r[col] for r in sched[1:]}["oracle+speedup"] == "yes"
    assert all(r[col] == "" for r in sched[1:] if r[0] != "oracle+speedup")
    runs = next(t for t in md if t[0][:3] == ["scenario", "scheduler", "seed"])
    assert all((r[-1] == "yes") == (r[1] == "oracle+speedup") for r in runs[1:])
    headroom = next(t for t in md if "best scheduler" in t[0])
    assert all(r[headroom[0].index("best scheduler")] != "oracle+speedup" for r in headroom[1:])


def test_timeout_is_a_row(tmp_path: Path) -> None:
    (tmp_path / "tiny.toml").write_text(TINY)
    out = tmp_path / "out"
    args = ["evaluate", "--scenarios", str(tmp_path / "tiny.toml"), "--schedulers", "mct"]
    rc = main([*args, "--seeds", "1", "--jobs", "1", "--timeout", "1e-9", "--out", str(out)])
    assert rc == 6
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert rows[0]["status"] == "timeout" and "time limit" in rows[0]["error"]


def rlsched(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("rlsched") or str(Path(sys.executable).with_name("rlsched"))
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=300, check=False)


def test_parallel_workers_give_the_same_rows(tmp_path: Path, report: Path) -> None:
    """Two worker processes (the real pool, as users run it) give the single-process numbers."""
    (tmp_path / "tiny.toml").write_text(TINY)
    out = tmp_path / "out"
    r = rlsched(
        "evaluate",
        "--scenarios",
        str(tmp_path / "tiny.toml"),
        "--schedulers",
        "mct+mlsm,random+speedup",
        "--seeds",
        "2",
        "--jobs",
        "2",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    par = json.loads((out / "results.json").read_text())["rows"]
    one = [
        x
        for x in json.loads((report / "results.json").read_text())["rows"]
        if x["scheduler"] in ("mct+mlsm", "random+speedup")
    ]
    key = ("scheduler", "seed", "throughput", "latency_p95_s", "bound_throughput_ub")
    assert [[x[k] for k in key] for x in par] == [[x[k] for k in key] for x in one]


@pytest.fixture
def other_version_model(tmp_path: Path) -> Path:
    d = tmp_path / "model"
    shutil.copytree(PRETRAINED, d)
    meta = json.loads((d / "meta.json").read_text())
    meta["feature_version"] = int(meta["feature_version"]) + 99
    write_meta(d, meta)  # as a build with other features writes it
    return d


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--scenarios", "nope", "--schedulers", "mct"], "nope"),
        (["--scenarios", "paper", "--schedulers", "mct,bogus+x"], "'bogus'"),
        (["--scenarios", "paper", "--schedulers", "mct+bogus"], "'bogus'"),
        (["--scenarios", "paper", "--schedulers", "mct", "--seeds", "0"], "--seeds"),
        (["--scenarios", "paper@x", "--schedulers", "mct"], "paper@x"),
        (["--scenarios", "paper"], "--schedulers"),
        (["--suite", "nope"], "--suite"),
        # A repeat ran twice and its runs counted as two seeds ("runs ok 2/2" of one seed).
        (
            ["--scenarios", "paper", "--schedulers", "mct,mct-mem,mct"],
            "--schedulers: value: expected each entry once",
        ),
        (
            ["--scenarios", "paper#50,paper#50", "--schedulers", "mct"],
            "--scenarios: value: expected each entry once",
        ),
    ],
)
def test_bad_input_one_line_exit_2_before_work(tmp_path: Path, args: list[str], fragment: str) -> None:
    out = tmp_path / "out"
    r = rlsched("evaluate", *args, "--out", str(out))
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]  # argparse's own errors come after its usage lines
    assert "error" in last and fragment in last and "Traceback" not in r.stderr
    assert not (out / "runs.jsonl").exists()


def test_model_of_another_feature_version_is_refused(tmp_path: Path, other_version_model: Path) -> None:
    out = tmp_path / "out"
    r = rlsched(
        "evaluate",
        "--scenarios",
        "paper",
        "--schedulers",
        "ldwp",
        "--model",
        str(other_version_model),
        "--out",
        str(out),
    )
    assert r.returncode == 2
    assert "--model" in r.stderr and "feature version" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_model_whose_meta_was_edited_by_hand_is_refused_naming_the_seal(tmp_path: Path) -> None:
    d = tmp_path / "model"
    shutil.copytree(PRETRAINED, d)
    text = (d / "meta.json").read_text()
    (d / "meta.json").write_text(text.replace('"gamma": 0.9', '"gamma": 0.8'))
    r = rlsched("simulate", "--scenario", "paper", "--scheduler", "ldwp+iawp", "--model", str(d))
    assert r.returncode == 2, r.stderr
    assert "--model" in r.stderr and "meta.json: meta_sha256: expected the sha256" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_unwritable_out_is_refused(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = rlsched("evaluate", "--scenarios", "paper", "--schedulers", "mct", "--out", str(blocker / "sub"))
    assert r.returncode == 2 and "--out" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow  # 16 full paper runs; the report writer stays tested by the other tests here
def test_paper_suite_claims_table_is_computed_from_the_rows(tmp_path: Path) -> None:
    """The paper's comparison: the measured gains in the claims table are those of results.json."""
    out = tmp_path / "paper"
    scheds = "random+speedup,mct+speedup,pats+speedup,ldwp+iawp"
    args = ["evaluate", "--suite", "paper", "--scenarios", "paper@20,paper@40", "--schedulers", scheds]
    assert main([*args, "--seeds", "2", "--jobs", "1", "--convergence-steps", "0", "--out", str(out)]) == 0
    rows = json.loads((out / "results.json").read_text())["rows"]
    md = (out / "report.md").read_text()
    assert "The TPDS 2021 comparison" in md and "Speedup over Random" in md and "runs/scratch" in md
    claims = next(t for t in _md_tables(md) if t[0][:2] == ["metric", "paper"])
    for key, cells in zip(("throughput", "gpu_util"), claims[1:], strict=True):
        gains = []
        for rate in ("paper@20", "paper@40"):
            mine = [r[key] for r in rows if r["scenario"] == rate and r["scheduler"] == "ldwp+iawp"]
            for other in ("random+speedup", "mct+speedup", "pats+speedup"):
                theirs = [r[key] for r in rows if r["scenario"] == rate and r["scheduler"] == other]
                gains.append(np.mean(mine) / np.mean(theirs) - 1)
        assert cells[2] == f"{np.mean(gains) * 100:+.1f} %"
    assert (out / "img" / "paper-vs-rate.png").read_bytes().startswith(PNG)


@pytest.mark.slow
def test_paper_suite_trains_the_convergence_runs(tmp_path: Path) -> None:
    """Without --runs the paper suite trains LDWP with and without pretraining and plots both."""
    out = tmp_path / "paper"
    args = ["evaluate", "--suite", "paper", "--scenarios", "paper@50#200", "--schedulers", "mct"]
    assert main([*args, "--seeds", "1", "--jobs", "1", "--convergence-steps", "600", "--out", str(out)]) == 0
    for d in ("pretrained", "scratch"):
        hist = json.loads((out / "runs" / d / "history.json").read_text())
        assert [h["step"] for h in hist][-1] == 600
    md = (out / "report.md").read_text()
    assert "## Learning curves" in md and "validation seeds" in md
    assert (out / "img" / "learning-curves.png").read_bytes().startswith(PNG)


def _threads() -> tuple[int, list[int]]:
    import torch
    from threadpoolctl import threadpool_info

    return torch.get_num_threads(), sorted({i["num_threads"] for i in threadpool_info()})


def test_workers_run_torch_and_blas_on_one_thread() -> None:
    """Workers are one per core: a worker with a BLAS pool per core oversubscribed them (ldwp ran
    5x slower in the pool than alone, measured on 2 cores)."""
    from concurrent.futures import ProcessPoolExecutor

    from experiments.worker_pool import _ONE_THREAD, worker_init

    ctx = __import__("multiprocessing").get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=ctx, initializer=worker_init) as pool:
        assert pool.submit(_threads).result() == (1, [1])
    assert set(_ONE_THREAD) == {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"}


def test_evaluate_as_a_library_creates_its_output_folder(tmp_path: Path) -> None:
    from experiments.evaluate import EvalConfig, evaluate

    (tmp_path / "tiny.toml").write_text(TINY)
    out = tmp_path / "not" / "yet" / "there"
    evaluate(EvalConfig([str(tmp_path / "tiny.toml")], ["mct"], [20000]), out, progress=False)
    assert (out / "results.json").is_file()


def test_share_of_the_gap_from_the_best_heuristic_to_the_bound() -> None:
    from experiments.report_writer import _ratios

    def row(sched: str, thr: float, clairvoyant: bool = False, lost: int = 0) -> dict:
        return {
            "scenario": "s",
            "seed": 1,
            "scheduler": sched,
            "throughput": thr,
            "bound_throughput_ub": 1.0,
            "clairvoyant": clairvoyant,
            "not_completed": lost,
        }

    rows = [
        row("mct+mlsm", 0.7),
        row("mct+iawp-pass", 0.8),  # the best heuristic
        row("ldwp+iawp", 0.9),  # learned: closes half the gap, and is not the reference
        row("mct+iawp-rl", 0.95),  # learned placer
        row("oracle+iawp", 0.99, clairvoyant=True),
        row("random+first-free", 0.85, lost=3),  # lost tasks: not a reference either
    ]
    _ratios(rows)
    share = {r["scheduler"]: r["gap_share"] for r in rows}
    assert share["mct+iawp-pass"] == pytest.approx(0.0)
    assert share["ldwp+iawp"] == pytest.approx(0.5)
    assert share["mct+iawp-rl"] == pytest.approx(0.75)
    assert share["mct+mlsm"] == pytest.approx(-0.5)
    rows = [row("mct+mlsm", 1.0 - 1e-5), row("ldwp+iawp", 1.0)]
    _ratios(rows)
    assert [r["gap_share"] for r in rows] == [None, None]  # no gap left to share
    rows = [
        {**row("mct+mlsm", 0.7), "bound_offered_load": 0.5},
        {**row("ldwp+iawp", 0.9), "bound_offered_load": 0.5},
    ]
    _ratios(rows)
    assert [r["gap_share"] for r in rows] == [None, None]  # arrival-bound: the bound is the arrivals


def test_intervals_over_few_seeds_are_their_range_and_t_intervals_stay_in_range() -> None:
    from experiments.report_stats import summarise, summarise_key

    two = summarise([0.2, 0.9])
    assert (two.low, two.high, two.how) == (0.2, 0.9, "range") and two.cell() == "0.550 [0.200, 0.900]"
    five = summarise_key([0.97, 0.99, 1.0, 0.98, 1.0], "gpu_util")  # a t-interval would pass 1
    assert five.how == "t" and five.high == 1.0 and five.low < five.mean and " [" in five.cell()
    wide = summarise([0.1, 0.1, 0.1, 0.1, 30.0])  # a latency: never below 0
    assert wide.low == 0.0 and wide.errors()[0] == wide.mean
    plain = summarise([10.0, 11.0, 12.0, 11.0, 10.0])
    assert plain.symmetric() and " ± " in plain.cell()


def test_the_revision_is_not_dirty_for_a_replaced_report_alone(tmp_path: Path) -> None:
    """``make report-example`` removes the committed report before writing it again: the code was
    stamped ``-dirty`` from a clean checkout. Changes inside the report's own folder do not count;
    changes elsewhere still do."""
    from experiments.evaluate import git_revision

    def git(*args: str) -> None:
        cmd = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args]
        subprocess.run(cmd, check=True, capture_output=True)

    (tmp_path / "docs" / "example").mkdir(parents=True)
    (tmp_path / "docs" / "example" / "report.md").write_text("old\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "c")
    (tmp_path / "docs" / "example" / "report.md").unlink()
    out = tmp_path / "docs" / "example"
    assert not git_revision(out, tmp_path).endswith("-dirty")
    assert git_revision(None, tmp_path).endswith("-dirty")
    (tmp_path / "code.py").write_text("x = 2\n")
    assert git_revision(out, tmp_path).endswith("-dirty")
