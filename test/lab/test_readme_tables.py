"""The docs' numbers and names against the committed files: README.md's and benchmarks/README.md's generated tables
equal what the CSVs give, no commit hash of this repository appears in README, docs/ or benchmarks/README.md, and
every file the docs name under benchmarks/ or autotune/models/ exists."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lab import readme_tables

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
DOCS = [ROOT / "README.md", BENCH / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


GENERATED = [ROOT / "README.md", BENCH / "README.md", ROOT / "docs" / "autotune.md"]


@pytest.mark.parametrize("path", GENERATED, ids=lambda p: str(p.relative_to(ROOT)))
def test_generated_tables_match_the_committed_files(path):
    found = readme_tables.blocks(path.read_text())
    assert found, f"{path.name} has no generated table"
    assert readme_tables.stale(path, BENCH) == [], (
        f"{path.relative_to(ROOT)}: tables out of date; run PYTHONPATH=. python benchmarks/make_readme_tables.py")


def test_readme_speed_table_is_generated_and_readme_is_short():
    text = (ROOT / "README.md").read_text()
    assert "readme_speed" in readme_tables.blocks(text)
    assert len(text.splitlines()) <= 180, "README.md: at most 180 lines; details go to docs/"


def test_a_changed_csv_makes_its_table_stale(tmp_path):
    """The check can fail: a CSV whose numbers changed no longer gives the committed table."""
    bench = tmp_path / "benchmarks"
    shutil.copytree(BENCH, bench, ignore=shutil.ignore_patterns("*.png", "archive"))
    summary = bench / "summary_engine_cpu.csv"
    lines = summary.read_text().splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("fpi,fused_numba,"))
    cells = lines[i].split(",")
    cells[5] = str(float(cells[5]) * 2)  # median_ratio
    lines[i] = ",".join(cells)
    summary.write_text("\n".join(lines) + "\n")
    assert readme_tables.stale(BENCH / "README.md", bench) == ["sweep"]
    assert readme_tables.stale(ROOT / "README.md", bench) == ["readme_speed"]
    updated = readme_tables.update((BENCH / "README.md").read_text(), bench)
    (tmp_path / "README.md").write_text(updated)
    assert readme_tables.stale(tmp_path / "README.md", bench) == []


def test_unknown_table_is_refused_by_name():
    with pytest.raises(ValueError, match="no_such_table"):
        readme_tables.render("no_such_table", BENCH)


HEX_WORD = re.compile(r"(?<![0-9A-Za-z_./-])([0-9a-f]{7,12})(?![0-9A-Za-z_-])")


def _is_commit(word: str) -> bool:
    r = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{word}^{{commit}}"], capture_output=True)
    return r.returncode == 0


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_commit_hash_in_the_docs(path):
    words = {w for w in HEX_WORD.findall(path.read_text()) if re.search(r"[0-9]", w) and re.search(r"[a-f]", w)}
    commits = sorted(w for w in words if _is_commit(w))
    assert commits == [], f"{path.relative_to(ROOT)} names commits {commits}: say what the code does, not when"


def test_the_hash_check_finds_a_commit():
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=8", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    assert HEX_WORD.findall(f"as run at {head.stdout.strip()}, quiet") == [head.stdout.strip()]
    assert _is_commit(head.stdout.strip())


NAMED_FILE = re.compile(r"(?:benchmarks/|autotune/models/)([A-Za-z0-9_.*<>/-]+\.(?:csv|md|txt|json|png|py|sh))")


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_named_result_file_exists(path):
    """Files named as ``benchmarks/...`` or ``autotune/models/...`` (no placeholders) exist."""
    missing = []
    for m in NAMED_FILE.finditer(path.read_text()):
        name = m.group(1)
        if any(c in name for c in "*<>") or "jetson" in name or "gpu" in name:
            continue  # a pattern or a file the reader makes (retraining on a device)
        where = BENCH if m.group(0).startswith("benchmarks/") else ROOT / "bayes_infer_ros" / "autotune" / "models"
        if not (where / name).exists():
            missing.append(m.group(0))
    assert missing == [], f"{path.relative_to(ROOT)} names files that do not exist: {missing}"


def _facts(name: str) -> dict:
    rows = readme_tables._rows(BENCH / name)
    params = [float(r["param_count"]) for r in rows if r["variant"] == "pymdp" and r["param_count"]]
    return {"configs": len({r["config_id"] for r in rows}), "strata": len({r["stratum"] for r in rows}),
            "max_fm": max(max(int(r["F"]), int(r["M"])) for r in rows),
            "params": (f"{min(params):.1g}" if params else "", f"{max(params):.2g}" if params else ""),
            "per_alg": {a: len({r["config_id"] for r in rows if r["algorithm"] == a}) for a in ("fpi", "vmp", "mmp")}}


def _prose(path: Path) -> str:
    return " ".join(path.read_text().split())


def test_prose_numbers_match_the_csvs():
    """The counts and sizes the docs give in words, against the CSVs they describe."""
    bench, readme = _prose(BENCH / "README.md"), _prose(ROOT / "README.md")
    sweep = _facts("sweep_engine_cpu.csv")
    phrase = f"{sweep['configs']} configurations from {sweep['strata']} of the paper's 20"
    assert phrase in bench and sweep["max_fm"] == 25 and "F and M up to 25" in bench
    assert f"On {sweep['configs']} generated models from {sweep['strata']} of the paper's 20 strata" in readme
    m125 = _facts("sweep_engine_m125_cpu.csv")
    assert f"up to {float(m125['params'][1]):.1e} parameters".replace("e+0", "e") in bench
    variants = _facts("variants_cpu.csv")
    assert variants["configs"] == 12
    lo, hi = f"{float(variants['params'][0]):.0f}", f"{float(variants['params'][1]):.1e}".replace("e+0", "e")
    assert f"from {lo} to {hi} A elements" in bench and f"{lo} to {hi} A elements" in readme
    assert _facts("noise_a_engine_cpu.csv")["configs"] == _facts("noise_b_engine_cpu.csv")["configs"] == 6
    assert "the same 6 configurations timed twice" in bench
    gpu = _facts("variants_nvidia_h100_80gb_hbm3.csv")
    assert gpu["per_alg"] == {"fpi": 6, "vmp": 5, "mmp": 5}
    assert f"6 of the dozen models (60 to {float(gpu['params'][1]):.1e} A elements; 5 for VMP/MMP)".replace(
        "e+0", "e") in bench
    unseen = {r["config_id"] for r in readme_tables._rows(BENCH / "unseen_vs_baseline_cpu.csv")}
    assert f"{len(unseen)} models from another generator seed" in bench


def test_the_gpu_prose_matches_the_h200_files():
    """README's "from about 100 agents per call the GPU wins": the smallest b at which the best GPU candidate's
    agent-ticks per second beat the host CPU's best (agents_throughput_nvidia_h200.csv), and in benchmarks/README the
    default model's tick is fastest on the host CPU (default_model_latency_fused_cuda_nvidia_h200.txt)."""
    rows = readme_tables._rows(BENCH / "agents_throughput_nvidia_h200.csv")
    best: dict[tuple[int, str], float] = {}
    for r in rows:
        key = (int(r["b"]), "cpu" if r["device"] == "cpu" else "gpu")
        best[key] = max(best.get(key, 0.0), float(r["agent_ticks_per_s"]))
    crossover = min(b for b, dev in best if dev == "gpu" and best[(b, "gpu")] > best[(b, "cpu")])
    assert crossover == 100
    assert all(best[(b, "gpu")] > best[(b, "cpu")] for b, dev in best if dev == "gpu" and b >= crossover)
    assert f"from about {crossover} agents per call the GPU" in " ".join((ROOT / "README.md").read_text().split())
    med = readme_tables.latency_medians(BENCH / "default_model_latency_fused_cuda_nvidia_h200.txt")
    gpu = [t for (alg, name), t in med.items() if alg == "fpi" and not name.startswith("fused_numba")]
    assert med[("fpi", "fused_numba:tick")] < min(gpu)
