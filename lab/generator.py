"""Random POMDP configurations, faithful to Section V-A of the paper (three stages).

1. Coarse dimensionality: F and M from {5, 10, 25, 125} with F <= M; the upper limits of the state and of the
   observation dimensions drawn independently from {5, 10, 25}; lower limit 2. Together with the two
   fine-grained regimes (below) this is the grid of "high-level parameters": 10 (F, M) pairs x 3 x 3 limits
   x 2 regimes = 180 combinations.
2. Fine-grained dimensions: "uniform" draws every n_f and m_i uniformly from [2, upper]; "skewed" draws one
   fifth of them (rounded, at least one) from the top 10% of that range and the rest from the bottom 10%.
3. A-dependencies: every factor is first placed in one list (largest factors first, preferring lists that will
   stay short, so coverage does not create huge arrays); list lengths k_i in 1..min(10, F) follow an
   exponential prior p(k) ~ exp(-rate (k - 1)); the rest of each list is drawn without replacement with
   weights n_f ** (-(k_i - 1)), so long lists are biased towards small factors (the paper's negative
   correlation) while short lists may take any factor.

Five samples per combination (stages 2-3 repeated) give **900** configurations. The paper reports 770 but
does not say what it dropped; 900 - 770 = 130 = 26 combinations x 5, so the paper most likely removed 26 of
the 180 combinations (for example those it could not run), but the text does not name them. We keep the full
grid and instead bound each A array (``max_a_elements``, default 2**20 elements = 4 MiB in float32): a list
whose array would exceed it drops its largest non-coverage factor until it fits. With seed 0 the bound shortens
355 of 55,000 lists in 109 of the 900 configurations (``summarise`` prints this); without it the 99th percentile
of a configuration's total A size is 5e10 elements (200 GB), which no device runs. ``--max-a-elements 0``
disables it.

Everything is seeded: the structure of configuration ``i`` comes from ``SeedSequence([seed, i, 0])`` and its
array values from ``SeedSequence([seed, i, 1])``, so any one configuration can be rebuilt on its own, in any
order, on any machine. A and B values are uniform then normalised over the outcome axis; D is uniform.

The cache folder (default ``.cache/pomdp_configs``, git-ignored) holds ``index.json`` (the generator
parameters and every configuration's structure) and ``npz/<config_id>.npz`` (the arrays, written by
``bayes_infer_ros.model.save_npz``). Arrays are written by ``python -m lab generate`` or on first use.
"""
from __future__ import annotations

import argparse
import functools
import itertools
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Optional, Sequence

import numpy as np

from bayes_infer_ros.model import GenerativeModel, load_npz, save_npz

F_LEVELS = (5, 10, 25, 125)
M_LEVELS = (5, 10, 25, 125)
DIM_UPPER_LEVELS = (5, 10, 25)
DIM_LOWER = 2
REGIMES = ("uniform", "skewed")
SAMPLES_PER_COMBINATION = 5
MAX_DEPENDENCIES = 10
DEFAULT_SEED = 0
DEFAULT_DEP_RATE = 0.5
DEFAULT_MAX_A_ELEMENTS = 2**20
DEFAULT_NUM_CONTROLS = (1, 3)  # inclusive range of u_f
DEFAULT_CACHE = Path(".cache/pomdp_configs")
GENERATOR_VERSION = 1


@dataclass(frozen=True)
class ConfigSpec:
    """The structure of one generated POMDP (arrays are rebuilt from ``seed`` and ``index``).

    num_states: (F,) n_f;  num_obs: (M,) m_i;  num_controls: (F,) u_f;  A_dependencies: M sorted tuples.
    """

    config_id: str
    index: int
    seed: int
    F: int
    M: int
    state_upper: int
    obs_upper: int
    regime: str
    sample: int
    num_states: tuple[int, ...]
    num_obs: tuple[int, ...]
    num_controls: tuple[int, ...]
    A_dependencies: tuple[tuple[int, ...], ...]
    capped_lists: int = 0  # how many dependency lists the size bound shortened

    @property
    def stratum(self) -> str:
        return f"F{self.F}_M{self.M}_{self.regime}"

    def a_elements(self) -> list[int]:
        return [m * math.prod(self.num_states[f] for f in deps) for m, deps in zip(self.num_obs, self.A_dependencies)]

    def to_json(self) -> dict:
        d = asdict(self)
        d["num_states"] = list(self.num_states)
        d["num_obs"] = list(self.num_obs)
        d["num_controls"] = list(self.num_controls)
        d["A_dependencies"] = [list(x) for x in self.A_dependencies]
        return d

    @classmethod
    def from_json(cls, d: dict) -> "ConfigSpec":
        d = dict(d)
        d["num_states"] = tuple(d["num_states"])
        d["num_obs"] = tuple(d["num_obs"])
        d["num_controls"] = tuple(d["num_controls"])
        d["A_dependencies"] = tuple(tuple(x) for x in d["A_dependencies"])
        return cls(**d)


def combinations() -> list[tuple[int, int, int, int, str]]:
    """The grid of high-level parameters: (F, M, state_upper, obs_upper, regime), F <= M."""
    return [
        (F, M, su, ou, regime)
        for F, M in itertools.product(F_LEVELS, M_LEVELS)
        if F <= M
        for su, ou in itertools.product(DIM_UPPER_LEVELS, DIM_UPPER_LEVELS)
        for regime in REGIMES
    ]


def sample_dimensions(rng: np.random.Generator, count: int, upper: int, regime: str) -> np.ndarray:
    """Stage 2: ``count`` dimensions in [2, upper] under the uniform or skewed regime."""
    if regime == "uniform":
        return rng.integers(DIM_LOWER, upper + 1, size=count)
    if regime != "skewed":
        raise ValueError(f"unknown regime {regime!r}")
    width = upper - DIM_LOWER
    bottom_hi = max(DIM_LOWER, math.floor(DIM_LOWER + 0.1 * width))
    top_lo = min(upper, math.ceil(upper - 0.1 * width))
    dims = rng.integers(DIM_LOWER, bottom_hi + 1, size=count)
    n_top = max(1, round(count / 5))
    top = rng.choice(count, size=n_top, replace=False)
    dims[top] = rng.integers(top_lo, upper + 1, size=n_top)
    return dims


def dependency_length_probs(max_len: int, rate: float = DEFAULT_DEP_RATE) -> np.ndarray:
    """Exponential prior over 1..max_len favouring short lists."""
    w = np.exp(-rate * np.arange(max_len))
    return w / w.sum()


def sample_dependencies(
    rng: np.random.Generator,
    num_states: Sequence[int],
    num_obs: Sequence[int],
    rate: float = DEFAULT_DEP_RATE,
    max_a_elements: int = DEFAULT_MAX_A_ELEMENTS,
) -> tuple[tuple[tuple[int, ...], ...], int]:
    """Stage 3: A-dependency lists covering every factor (requires F <= M). Returns (deps, lists capped)."""
    F, M = len(num_states), len(num_obs)
    if F > M:
        raise ValueError("the generator assumes F <= M (every factor gets its own modality first)")
    n = np.asarray(num_states, dtype=float)
    max_len = min(MAX_DEPENDENCIES, F)
    lengths = rng.choice(np.arange(1, max_len + 1), size=M, p=dependency_length_probs(max_len, rate))

    # Coverage: largest factors first, each to a distinct modality, preferring modalities with short lists.
    lists: list[list[int]] = [[] for _ in range(M)]
    free = np.ones(M, dtype=bool)
    for f in sorted(range(F), key=lambda j: (-num_states[j], j)):
        w = np.where(free, np.exp(-rate * (lengths - 1) * np.log(max(n[f], 2.0))), 0.0)
        i = int(rng.choice(M, p=w / w.sum()))
        lists[i].append(f)
        free[i] = False
    coverage = [tuple(x) for x in lists]

    # Fill each list to its length, biased towards small factors the longer the list.
    for i in range(M):
        k = int(lengths[i])
        need = k - len(lists[i])
        if need <= 0:
            continue
        candidates = np.array([f for f in range(F) if f not in lists[i]])
        w = n[candidates] ** (-(k - 1.0))
        pick = rng.choice(candidates, size=need, replace=False, p=w / w.sum())
        lists[i].extend(int(f) for f in pick)

    capped = 0
    if max_a_elements:
        for i in range(M):
            size = num_obs[i] * math.prod(num_states[f] for f in lists[i])
            if size <= max_a_elements:
                continue
            capped += 1
            removable = sorted((f for f in lists[i] if f not in coverage[i]), key=lambda f: (-num_states[f], f))
            while size > max_a_elements and removable:
                f = removable.pop(0)
                lists[i].remove(f)
                size //= num_states[f]
    return tuple(tuple(sorted(x)) for x in lists), capped


def _structure_rng(seed: int, index: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, index, 0]))


def _values_rng(seed: int, index: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, index, 1]))


def generate_specs(
    seed: int = DEFAULT_SEED,
    samples: int = SAMPLES_PER_COMBINATION,
    rate: float = DEFAULT_DEP_RATE,
    max_a_elements: int = DEFAULT_MAX_A_ELEMENTS,
    num_controls: tuple[int, int] = DEFAULT_NUM_CONTROLS,
) -> list[ConfigSpec]:
    """All configurations, in a fixed order: combination-major, then sample (memoised: a few seconds)."""
    return list(_generate_specs(seed, samples, rate, max_a_elements, tuple(num_controls)))


@functools.lru_cache(maxsize=4)
def _generate_specs(seed: int, samples: int, rate: float, max_a_elements: int,
                    num_controls: tuple[int, int]) -> tuple[ConfigSpec, ...]:
    specs = []
    index = 0
    for F, M, su, ou, regime in combinations():
        for s in range(samples):
            rng = _structure_rng(seed, index)
            num_states = tuple(int(x) for x in sample_dimensions(rng, F, su, regime))
            num_obs = tuple(int(x) for x in sample_dimensions(rng, M, ou, regime))
            deps, capped = sample_dependencies(rng, num_states, num_obs, rate, max_a_elements)
            controls = tuple(int(x) for x in rng.integers(num_controls[0], num_controls[1] + 1, size=F))
            specs.append(ConfigSpec(
                config_id=f"c{index:04d}", index=index, seed=seed, F=F, M=M, state_upper=su, obs_upper=ou,
                regime=regime, sample=s, num_states=num_states, num_obs=num_obs, num_controls=controls,
                A_dependencies=deps, capped_lists=capped,
            ))
            index += 1
    return tuple(specs)


def build_model(spec: ConfigSpec, dtype=np.float32):
    """Stage 4: uniform random A and B, normalised over the outcome axis; uniform D. Deterministic."""
    rng = _values_rng(spec.seed, spec.index)
    A = []
    for m, deps in zip(spec.num_obs, spec.A_dependencies):
        a = rng.random((m,) + tuple(spec.num_states[f] for f in deps), dtype=np.float64)
        A.append((a / a.sum(axis=0, keepdims=True)).astype(dtype))
    B = []
    for n, u in zip(spec.num_states, spec.num_controls):
        b = rng.random((n, n, u), dtype=np.float64)
        B.append((b / b.sum(axis=0, keepdims=True)).astype(dtype))
    return GenerativeModel(A=A, A_dependencies=spec.A_dependencies, B=B)


def with_controls(model: GenerativeModel, controlled: Sequence[int], num_controls: int = 3,
                  seed: int = 0) -> GenerativeModel:
    """A copy of ``model`` for policy inference: factors ``controlled`` get ``num_controls`` controls each (fresh
    uniform random B, normalised over the next state), the others one (their B under control 0); C is drawn per
    modality (standard normal). Deterministic in ``seed``."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 2]))
    B = []
    for f, b in enumerate(model.B):
        if f in controlled:
            x = rng.random(b.shape[:-1] + (num_controls,))
            B.append((x / x.sum(axis=0, keepdims=True)).astype(b.dtype))
        else:
            B.append(np.ascontiguousarray(b[..., :1]))
    C = [rng.normal(size=m).astype(model.A[0].dtype) for m in model.num_obs]
    return GenerativeModel(A=model.A, A_dependencies=model.A_dependencies, B=B, B_dependencies=model.B_dependencies,
                           D=model.D, C=C)


# ---- the cache folder ---------------------------------------------------------------------------
def write_index(specs: Sequence[ConfigSpec], cache: Path, params: dict) -> Path:
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / "index.json"
    doc = {"generator_version": GENERATOR_VERSION, "params": params, "configs": [s.to_json() for s in specs]}
    path.write_text(json.dumps(doc, indent=0))
    return path


def read_index(cache: Path = DEFAULT_CACHE) -> list[ConfigSpec]:
    path = Path(cache) / "index.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: run `python -m lab generate --out {cache}` first")
    return [ConfigSpec.from_json(d) for d in json.loads(path.read_text())["configs"]]


def load_or_build(spec: ConfigSpec, cache: Optional[Path] = DEFAULT_CACHE, dtype=np.float32):
    """The model of ``spec``: from ``cache/npz/<id>.npz`` when present, else built (and saved when cache set)."""
    if cache is not None:
        path = Path(cache) / "npz" / f"{spec.config_id}.npz"
        if path.is_file():
            return load_npz(path, validate=False).with_dtype(dtype)
    model = build_model(spec, dtype=np.float32)
    if cache is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.stem + ".tmp.npz")
        save_npz(model, tmp)
        tmp.replace(path)
    return model.with_dtype(dtype)


def summarise(specs: Sequence[ConfigSpec]) -> dict:
    sizes = np.array([sum(s.a_elements()) for s in specs], dtype=float)
    lens = np.array([len(d) for s in specs for d in s.A_dependencies])
    return {
        "configurations": len(specs),
        "combinations": len({(s.F, s.M, s.state_upper, s.obs_upper, s.regime) for s in specs}),
        "configs_with_capped_lists": int(sum(s.capped_lists > 0 for s in specs)),
        "capped_lists": int(sum(s.capped_lists for s in specs)),
        "total_A_elements_median": float(np.median(sizes)),
        "total_A_elements_max": float(sizes.max()),
        "dependency_length_hist": {int(k): int((lens == k).sum()) for k in range(1, MAX_DEPENDENCIES + 1)},
    }


def select_specs(specs: Sequence[ConfigSpec], ids: Optional[Iterable[str]] = None,
                 limit: Optional[int] = None) -> list[ConfigSpec]:
    out = list(specs)
    if ids:
        wanted = set(ids)
        out = [s for s in out if s.config_id in wanted]
    if limit is not None:
        out = out[:limit]
    return out


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab generate", description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=DEFAULT_CACHE, help="cache folder (git-ignored)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--samples", type=int, default=SAMPLES_PER_COMBINATION, help="samples per combination")
    p.add_argument("--dep-rate", type=float, default=DEFAULT_DEP_RATE, help="exponential prior rate")
    p.add_argument("--max-a-elements", type=int, default=DEFAULT_MAX_A_ELEMENTS, help="0: no bound")
    p.add_argument("--index-only", action="store_true", help="write index.json only (arrays built on use)")
    p.add_argument("--ids", nargs="*", help="write arrays only for these config ids")
    p.add_argument("--limit", type=int, help="write arrays only for the first N configurations")
    args = p.parse_args(argv)

    params = {"seed": args.seed, "samples": args.samples, "dep_rate": args.dep_rate,
              "max_a_elements": args.max_a_elements, "num_controls": list(DEFAULT_NUM_CONTROLS)}
    specs = generate_specs(args.seed, args.samples, args.dep_rate, args.max_a_elements)
    path = write_index(specs, args.out, params)
    print(f"wrote {path}: {len(specs)} configurations")
    print(json.dumps(summarise(specs), indent=1))
    if not args.index_only:
        chosen = select_specs(specs, args.ids, args.limit)
        try:  # optional dependency: tqdm (the [bench] extra) only draws a progress bar
            from tqdm import tqdm
        except ImportError:  # pragma: no cover
            tqdm = lambda x, **k: x  # noqa: E731
        for spec in tqdm(chosen, desc="arrays", unit="cfg"):
            load_or_build(spec, args.out)
        print(f"arrays in {args.out / 'npz'}: {len(chosen)} written or already present")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
