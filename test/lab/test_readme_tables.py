"""The generated blocks of README.md, benchmarks/README.md and docs/autotune.md (lab/readme_tables.py): each equals
what the committed result files give, and the generator, on small synthetic inputs, counts, sizes, summarises and
finds crossovers as its blocks say. Also: no commit hash of this repository appears in the docs, and every file
they name under benchmarks/ or autotune/models/ exists."""
from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lab import generator, readme_tables, report
from synthetic_rows import SYNTHETIC_VARIANTS, synthetic_rows

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
DOCS = [ROOT / "README.md", BENCH / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
GENERATED = readme_tables.FILES


# ---- the committed blocks ------------------------------------------------------------------------
@pytest.mark.parametrize("path", GENERATED, ids=lambda p: str(p.relative_to(ROOT)))
def test_generated_tables_match_the_committed_files(path):
    assert readme_tables.blocks(path.read_text()), f"{path.name} has no generated table"
    assert readme_tables.stale(path, BENCH) == [], (
        f"{path.relative_to(ROOT)}: tables out of date; run python -m lab readme-tables")


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


def test_the_check_command_names_what_is_out_of_date(capsys):
    assert readme_tables.main(["--check"]) == 0 and capsys.readouterr().out == ""


# ---- the generator on synthetic inputs -----------------------------------------------------------
def _write_csv(path: Path, rows: list[dict]) -> Path:
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return path


def _spec(index: int, regime: str, num_states: tuple, num_obs: tuple, deps: tuple) -> generator.ConfigSpec:
    return generator.ConfigSpec(config_id=f"c{index:04d}", index=index, seed=0, F=len(num_states), M=len(num_obs),
                                state_upper=max(num_states), obs_upper=max(num_obs), regime=regime, sample=0,
                                num_states=num_states, num_obs=num_obs, num_controls=(2,) * len(num_states),
                                A_dependencies=deps)


@pytest.fixture(scope="module")
def sweep_rows() -> list[dict]:
    specs = [_spec(0, "uniform", (3, 4), (2, 5, 3), ((0,), (0, 1), (1,))),
             _spec(1, "uniform", (5, 5, 2), (4, 4), ((0, 1), (1, 2))),
             _spec(2, "skewed", (10, 2), (6,) * 7, ((0,), (1,), (0, 1), (0,), (1,), (0, 1), (0,))),
             _spec(3, "skewed", (20,), (12, 9), ((0,), (0,)))]
    return synthetic_rows(specs, variants=SYNTHETIC_VARIANTS + ("fused_numba",))


def test_sizes_are_written_as_the_docs_write_them():
    assert [readme_tables.size_text(v) for v in (58, 999, 5300, 860_000, 1.3e6, 2.6e12)] == \
        ["58", "999", "5.3e3", "8.6e5", "1.3e6", "2.6e12"]


def test_the_facts_of_a_benchmark_csv(sweep_rows):
    facts = readme_tables.models_facts(sweep_rows)
    configs = {r["config_id"] for r in sweep_rows}
    sizes = [float(r["param_count"]) for r in sweep_rows if r["variant"] == report.PYMDP]
    assert facts == {"configs": len(configs), "strata": len({r["stratum"] for r in sweep_rows}),
                     "max_fm": max(max(r["F"], r["M"]) for r in sweep_rows),
                     "sizes": (readme_tables.size_text(min(sizes)), readme_tables.size_text(max(sizes)))}
    assert readme_tables.models_facts([{k: v for k, v in r.items() if k != "variant"} for r in sweep_rows])["sizes"] \
        == ("-", "-")  # a CSV without pymdp rows (the unseen models) has no sizes


def test_the_sweep_block_says_what_it_ran_on_and_who_won(sweep_rows, tmp_path):
    sweep_csv = _write_csv(tmp_path / "sweep.csv", sweep_rows)
    lat, _, status = report.latency_tables(sweep_rows, "median_s")
    summary_csv = _write_csv(tmp_path / "summary.csv", report.summary_rows(report.ratios(lat, {}), status))
    text = readme_tables.sweep_table(summary_csv, sweep_csv, autotuner=False)
    facts = readme_tables.models_facts(sweep_rows)
    assert text.startswith(f"{facts['configs']} configurations from {facts['strata']} of the paper's 20 (F, M, regime) "
                           f"strata, F and M up to {facts['max_fm']}, {facts['sizes'][0]} to {facts['sizes'][1]} A "
                           "elements.")
    assert [line.split(" | ")[0] for line in text.splitlines() if line.startswith("| ") and "x (" in line] == \
        ["| fpi", "| vmp", "| mmp"]
    wins, pairs = readme_tables.fastest_counts(sweep_rows, "median_s")
    assert pairs == 3 * facts["configs"] and sum(wins.values()) == pairs
    assert f"fused_numba is the fastest variant on {wins.get('fused_numba', 0)} of {pairs}" in text


def _throughput(tmp_path: Path, cpu: dict[int, float], gpu: dict[int, float]) -> Path:
    rows = [{"candidate": "fused_numba", "b": b, "device": "cpu", "agent_ticks_per_s": v} for b, v in cpu.items()]
    rows += [{"candidate": "fused_cuda", "b": b, "device": "gpu", "agent_ticks_per_s": v} for b, v in gpu.items()]
    return _write_csv(tmp_path / "agents.csv", rows)


def test_the_gpu_crossover_is_where_the_gpu_wins_from_then_on(tmp_path):
    cpu = {1: 1e5, 10: 1e5, 100: 1e5, 1000: 1e5}
    assert readme_tables.gpu_crossover(_throughput(tmp_path, cpu, {1: 1e3, 10: 2e5, 100: 9e4, 1000: 1e6})) == \
        (1000, [1, 10, 100, 1000])  # winning at b = 10 alone is no crossover
    assert readme_tables.gpu_crossover(_throughput(tmp_path, cpu, {1: 1e3, 10: 1e4, 100: 2e5, 1000: 2e6}))[0] == 100
    assert readme_tables.gpu_crossover(_throughput(tmp_path, cpu, {1: 1e3, 10: 1e4, 100: 5e4, 1000: 9e4}))[0] is None


def test_the_gpu_summary_names_where_the_tick_is_fastest_and_the_crossover(tmp_path):
    latency = tmp_path / "latency.txt"
    latency.write_text("fpi pymdp median 300.0 us p10 290.0 p90 310.0\n"
                       "fpi fused_dense median 500.0 us p10 490.0 p90 510.0\n"
                       "fpi fused_numba median 20.0 us p10 19.0 p90 21.0\n"
                       "fpi fused_numba:tick median 18.0 us p10 17.0 p90 19.0\n")
    cpu = {1: 1e5, 10: 1e5, 100: 1e5}
    line = readme_tables.gpu_summary(latency, _throughput(tmp_path, cpu, {1: 1e3, 10: 2e5, 100: 2e6}))
    assert "fastest on the host CPU (fused_numba's tick 18 us; the fastest GPU call, pymdp's, 300 us)" in line
    assert "from 10 agents per call (of b = 1, 10, 100)" in line
    never = readme_tables.gpu_summary(latency, _throughput(tmp_path, cpu, {1: 1e3, 10: 1e4, 100: 9e4}))
    assert never.endswith("the GPU does not beat the host CPU up to 100 agents per call.\n")


def test_the_fleet_table_takes_medians_over_rounds_and_marks_what_was_not_run(tmp_path):
    rows = [{"mode": "one_node", "agents": 10, "inference_ms_median": v, "rss_mib_total": 300 + v}
            for v in (0.1, 0.3, 0.2)]
    rows += [{"mode": "separate", "agents": 1, "inference_ms_median": 0.05, "rss_mib_total": 320}]
    text = readme_tables.fleet_table(_write_csv(tmp_path / "fleet.csv", rows))
    assert "| 1 | - | - | 0.050 | 320 MiB |" in text and "| 10 | 0.200 | 300 MiB | - | - |" in text


def test_the_first_start_table_has_one_row_per_run(tmp_path):
    def run(prepare, load, first):
        stat = {"median": first, "min": first - 1, "max": first + 1, "n": 3}
        return json.dumps({"when_utc": "2026-01-01 00:00", "prepare": prepare, "machine": f"x86_64; load {load}",
                           "first_configure_s": stat, "first_belief_s": stat, "warm_configure_s": stat,
                           "warm_belief_s": stat})
    path = tmp_path / "first_start.jsonl"
    path.write_text(run("clear", 1.5, 80.0) + "\n" + run("warmup", 0.5, 2.0) + "\n")
    rows = [line for line in readme_tables.first_start_table(path).splitlines() if line.startswith("| 2026")]
    assert rows == [
        "| 2026-01-01 00:00 | empty (before warmup existed) | 1.5 | 3 | 80.00 (79.00-81.00) | 80.00 (79.00-81.00) "
        "| 80.00 (79.00-81.00) | 80.00 (79.00-81.00) |",
        "| 2026-01-01 00:00 | warmed by `bayes-infer warmup` | 0.5 | 3 | 2.00 (1.00-3.00) | 2.00 (1.00-3.00) "
        "| 2.00 (1.00-3.00) | 2.00 (1.00-3.00) |"]


def test_the_unseen_block_counts_models_verify_steps_and_what_auto_ended_on(tmp_path):
    rows = [{"config_id": f"c{i}", "stratum": "s", "F": 5, "M": 25 if i else 10, "algorithm": alg,
             "verified": "baseline" if i == 2 else "", "swap": int(i == 2 and alg == "vmp"),
             "run": "baseline" if i == 2 and alg == "vmp" else "fused_numba", "run_over_baseline": 0.1 * (i + 1),
             "run_over_fastest": 1.0 + 0.01 * i, "configure_s": 1.0 + i}
            for i in range(3) for alg in readme_tables.ALGORITHMS]
    text = readme_tables.unseen_table(_write_csv(tmp_path / "unseen.csv", rows))
    assert text.startswith("3 models from another generator seed, F and M up to 25:")
    assert "| fpi | 3 | 1 | 0 | fused_numba 3 | 0.20 | 0.30 | 1.02 | 2.00 | 3.00 |" in text
    assert "| vmp | 3 | 1 | 1 | baseline 1, fused_numba 2 | 0.20 | 0.30 | 1.02 | 2.00 | 3.00 |" in text


# ---- the docs name no commit and no missing file -------------------------------------------------
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


NAMED_FILE = re.compile(r"(?:benchmarks/|autotune/models/)([A-Za-z0-9_.*<>/-]+\.(?:csv|md|txt|jsonl|json|png|py|sh))")


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
