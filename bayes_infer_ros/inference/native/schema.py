"""The native kernels' arguments, named: one schema per entry point and the ``ints`` header's slots.

The entry points take positional arguments (``TUNING.md``, "The model's arrays as positional arguments": a tuple
argument costs on every call). Their names live here instead: each entry point has a schema, a NamedTuple whose
field order is the positional order (``test/inference/native/test_schema.py`` holds every kernel's signature to
its schema), and every argument is documented once, below. Each entry point takes the model's arrays first (a
:class:`~.arrays.NativeModel` binds them by name once: ``NativeModel.bind``), then the call's. Pure Python: the
numba kernels (``fpi``, ``sequence``, ``transitions``, ``tick``, ``evidence``) and the CUDA kernels (``cuda_kernels``,
``cuda_window``) import it, and so do the engines.

Arguments
---------
Shapes: M modalities, F factors, K / KB the most dependencies of a modality / of a factor's transition, P_m the
elements of modality m's log likelihood (the product of its dependencies' sizes), P_f those of factor f's
transition's dependencies, L = sum_m P_m, O = sum m_i observation levels, S = sum n_f states, T steps of a window,
b agents (rows of the call's arrays), bA = 1 (one model for every agent) or b (model i for agent i). Integer arrays
are int64 unless said, float arrays the model's dtype (float32 or float64); every array is C-contiguous.

a_off : (M + 1,)
    Offset of modality m's log A in a row of ``log_A``: m_m rows of P_m elements (observation level major).
ll_off : (M + 1,)
    Offset of modality m's log likelihood (P_m,) in a step's ``L`` elements; ``ll_off[M] = L``.
deps : (M, K)
    The factors modality m depends on, in its A's axis order (-1 past its ``ks[m]``).
dims : (M, K)
    Their sizes (1 past ``ks[m]``).
ks : (M,)
    The number of dependencies of modality m.
ns : (F,)
    n_f, the states of factor f.
o_off : (M + 1,)
    Offset of modality m's levels in a packed observation; ``o_off[M] = O``.
s_off : (F + 1,)
    Offset of factor f's states in a packed belief; ``s_off[F] = S``.
b_off : (F + 1,)
    Offset of factor f's transitions in a row of ``B`` / ``log_B``: (u_f + 1, n_f, P_f), control major.
bdeps : (F, KB)
    The factors factor f's transition depends on, in its B's axis order (0 past ``bks[f]``).
bdims : (F, KB)
    Their sizes (1 past ``bks[f]``).
bks : (F,)
    The number of dependencies of factor f's transition.
ncontrols : (F,)
    u_f, the controls of factor f; control u_f is pymdp's neutral transition (1 / n_f), where a negative action
    points.
log_A : (bA, sum_m m_m P_m)
    pymdp's clipped log A of every modality (``a_off``).
B : (bA, sum_f (u_f + 1) n_f P_f)
    Every factor's transitions (``b_off``), the neutral transition appended.
log_B : (bA, sum_f (u_f + 1) n_f P_f)
    pymdp's clipped log of ``B``.
Bs : (bA, sum_f (u_f + 1) n_f P_f)
    The window's transitions as its algorithm reads them: ``log_B`` for VMP, ``B`` for MMP.
has_B : bool
    The model has transitions; without, ``B`` holds neutral transitions only and every step's forward message is
    the prior.
ints : (39 + sum of the index arrays' sizes,)
    The 13 index arrays of :class:`ModelIndex` packed in one: a header of 3 slots per array, (offset into
    ``ints``, rows, columns), then the arrays row-major (``arrays.pack_tick_model``). Array j's header is
    ``ints[3 j:3 j + 3]``; j is its slot constant (``A_OFF`` ... ``NCONTROLS``).
A_clip : (bA, NA)
    A clipped at ``minval`` in ``log_A``'s layout (the likelihoods a reading's surprise sums; exp of ``log_A`` without
    its rounding).
msg_off : (M + 1,)
    Where modality m's messages start in an agent's ``msg`` row: its message to dependency j at level a is at
    ``msg_off[m] + sum_{j' < j} dims[m, j'] + a`` (none when ``ks[m] < 2``).
kind_vmp : bool
    VMP (True) or MMP (False).
obs : (b, O), (O,) or (b, T, O)
    Packed observations: one distribution per modality (all zero: no evidence).
prior : (b, S) or (S,)
    Packed prior (FPI: this step's; VMP / MMP: the window's first step's).
actions : (b, T - 1, F)
    The controls taken between the window's steps; negative: pymdp's neutral transition.
action : (b, F) or (F,) int32
    The control each factor takes after this step: the next prior is predicted under it. In [0, u_f).
valid_steps : int
    Only the window's last ``valid_steps`` steps are real (pymdp's ``valid_steps``); negative: every step.
num_iter : int
    Iterations of the FPI update or of VMP / MMP's mirror descent.
tau : float
    VMP / MMP's step size (pymdp's ``tau``).
minval : float
    pymdp's clip before a log (``MINVAL``), in the model's dtype (its 0, 1 and 0.5 are derived from it).
b_index : int
    The row of ``B`` a prediction reads.
q : (S,)
    Packed beliefs to predict from.
posterior : (b, T, S)
    Packed posteriors whose free energy is computed (T = 1: one FPI step).
gates : (M,)
    Each modality's surprise gate (nats): a reading whose surprise under the prior is above it is left out of the
    tick; +inf: no gate.
inp : (b, O + S + F) or (b, T O + S + (T - 1) F)
    A CUDA launch's inputs, one row per agent, as floats: the tick's observation, prior and action, or the
    window's T observations, prior and T - 1 actions.
T : int
    The window's steps.
blocks : int
    Thread blocks per agent (a launch of b agents has b * blocks blocks; agent i's are i * blocks ...).
threads : int
    Threads of numba's threading layer for one call of b agents: the agents in that many contiguous blocks, one each.
phase_lo : int
    The first phase of the tick a launch runs (``cuda_large.phases``; a barrier between two phases).
phase_hi : int
    The phase after its last.
scratch : (b, L + 3 S)
    Each agent's log likelihood, constant term, iteration term and posterior, in global memory.
msg : (b, msg_off[M]) float64
    Each agent's messages of one iteration (``msg_off``).
out : (b, S), (b, T, S), (S,), (2, S), (b, 2, S), (b, M), (b, T, E) or ([b,] 2 S + M + E)
    The results, written by the kernel: beliefs; a tick's beliefs (row 0) and next prior (row 1); each reading's
    surprise; the free-energy terms, E = M + 3 F + 1 per step (``api.FreeEnergy``); a tick with its evidence: beliefs,
    next prior, surprise and the beliefs' free-energy terms.
"""
from __future__ import annotations

from typing import Any, NamedTuple


class ModelIndex(NamedTuple):
    """The model's 13 index arrays, in ``ints``' order (see the module's Arguments for each)."""

    a_off: Any
    ll_off: Any
    deps: Any
    dims: Any
    ks: Any
    ns: Any
    o_off: Any
    s_off: Any
    b_off: Any
    bdeps: Any
    bdims: Any
    bks: Any
    ncontrols: Any


# ``ints``' header slots: index array j sits at ints[ints[3 j]:], shaped (ints[3 j + 1], ints[3 j + 2]). The CPU tick
# kernels (``tick``) and the CUDA kernels (``cuda_kernels``, ``cuda_window``) read it by these names.
A_OFF, LL_OFF, DEPS, DIMS, KS, NS, O_OFF, S_OFF, B_OFF, BDEPS, BDIMS, BKS, NCONTROLS = range(len(ModelIndex._fields))
#: ``ints``' header: 3 slots per index array
HEADER_WIDTH = 3


def _schema(name: str, fields: str, doc: str) -> type:
    """A NamedTuple ``name`` of the space-separated ``fields`` (each documented in the module's Arguments)."""
    cls = NamedTuple(name, [(f, Any) for f in fields.split()])
    cls.__doc__ = doc
    return cls


FpiArgs = _schema(
    "FpiArgs", "log_A a_off ll_off deps dims ks ns o_off s_off obs prior num_iter minval out",
    "``fpi.fpi``: obs (b, O), prior (b, S) -> out (b, S), FPI of each row under model row i (bA = b).")
SequenceArgs = _schema(
    "SequenceArgs", "log_A a_off ll_off deps dims ks ns o_off s_off B log_B b_off bdeps bdims bks ncontrols has_B "
    "kind_vmp obs prior actions valid_steps num_iter tau minval out",
    "``sequence.sequence``: VMP or MMP of each row's window, obs (b, T, O), prior (b, S), actions (b, T - 1, F) -> "
    "out (b, T, S).")
PredictArgs = _schema(
    "PredictArgs", "B b_off bdeps bdims bks ncontrols ns s_off b_index q action out",
    "``transitions.predict``: pymdp ``compute_expected_state`` of q (S,) under action (F,) with B's row b_index -> "
    "out (S,).")
PredictRowsArgs = _schema(
    "PredictRowsArgs", "B b_off bdeps bdims bks ncontrols ns s_off q action out",
    "``transitions.predict_rows``: pymdp ``compute_expected_state`` of b rows, q (b, S), action (b, F) -> out (b, S); "
    "returns -1, or the first row whose action is out of range.")
TickAgentsArgs = _schema(
    "TickAgentsArgs", "ints log_A B obs prior num_iter minval action out",
    "``tick.fpi_tick_batched`` (through ``tick.fpi_tick_batched_entry``): b agents' FPI ticks, obs (b, O), prior "
    "(b, S), action (b, F) -> out (b, 2, S); returns -1, or the first agent whose action is out of range.")
SurpriseArgs = _schema(
    "SurpriseArgs", "log_A A_clip a_off ll_off deps dims ks o_off s_off obs prior minval out",
    "``evidence.surprise_rows``: each reading's surprise under its row's prior predictive, obs (b, O), prior (b, S) "
    "-> out (b, M).")
FreeEnergyArgs = _schema(
    "FreeEnergyArgs", "log_A a_off ll_off deps dims ks ns o_off s_off log_B b_off bdeps bdims bks ncontrols has_B "
    "obs prior posterior actions valid_steps minval out",
    "``evidence.free_energy_rows``: pymdp ``calc_vfe``'s terms of each row's posterior, obs (b, T, O), prior (b, S), "
    "posterior (b, T, S), actions (b, T - 1, F) -> out (b, T, E); transition terms from a window's second step.")
TickEvidenceAgentsArgs = _schema(
    "TickEvidenceAgentsArgs", "ints log_A B A_clip obs prior num_iter minval action gates out",
    "``evidence.fpi_tick_evidence_batched``: b agents' ticks with their evidence, obs (b, O), prior (b, S), action "
    "(b, F), gates (M,) -> out (b, 2 S + M + E); returns -1, or the first agent whose action is out of range.")
TickAgentsParallelArgs = _schema(
    "TickAgentsParallelArgs", "ints log_A B obs prior num_iter minval action out threads",
    "``tick.fpi_tick_agents_parallel`` (through ``tick.fpi_tick_agents_parallel_entry``): ``fpi_tick_batched`` on "
    "``threads`` contiguous blocks of the agents at once (numba's ``prange``); returns as ``fpi_tick_batched``.")
CudaTickArgs = _schema(
    "CudaTickArgs", "ints log_A B inp num_iter minval out",
    "``cuda_kernels.fpi_tick_kernel``'s kernel: b agents' FPI ticks in one launch (one block per agent), inp "
    "(b, O + S + F) -> out (b, 2, S).")
CudaTickGlobalArgs = _schema(
    "CudaTickGlobalArgs", "ints log_A B msg_off inp num_iter minval blocks phase_lo phase_hi scratch msg out",
    "``cuda_large.fpi_tick_global_kernel``'s kernel: b agents' FPI ticks with their state in global memory, "
    "``blocks`` blocks per agent, the phases [phase_lo, phase_hi), inp (b, O + S + F) -> out (b, 2, S).")
CudaWindowArgs = _schema(
    "CudaWindowArgs", "ints log_A Bs has_B inp T valid_steps kind_vmp num_iter tau minval out",
    "``cuda_window.window_kernel``'s kernel: b agents' VMP or MMP windows in one launch, inp "
    "(b, T O + S + (T - 1) F) -> out (b, T, S).")


#: Every entry point's schema, by the kernel it names (module.function).
ENTRY_POINTS: dict[str, type] = {
    "fpi.fpi": FpiArgs,
    "sequence.sequence": SequenceArgs,
    "transitions.predict": PredictArgs,
    "transitions.predict_rows": PredictRowsArgs,
    "tick.fpi_tick_batched": TickAgentsArgs,
    "tick.fpi_tick_agents_parallel": TickAgentsParallelArgs,
    "evidence.surprise_rows": SurpriseArgs,
    "evidence.free_energy_rows": FreeEnergyArgs,
    "evidence.fpi_tick_evidence_batched": TickEvidenceAgentsArgs,
    "cuda_kernels.fpi_tick": CudaTickArgs,
    "cuda_large.fpi_tick_global": CudaTickGlobalArgs,
    "cuda_window.window": CudaWindowArgs,
}


def model_fields(schema: type) -> tuple[str, ...]:
    """The schema's leading fields that the model supplies (``NativeModel``'s names): the engine binds them once."""
    fields = schema._fields
    n = 0
    while n < len(fields) and fields[n] in MODEL_NAMES:
        n += 1
    return fields[:n]


#: The names a model supplies (``NativeModel`` attributes; ``Bs`` is the CUDA window's choice of B or log B; the
#: evidence's ``A_clip`` is made by ``evidence_host.NativeEvidence``).
MODEL_NAMES = frozenset(ModelIndex._fields) | {"log_A", "B", "log_B", "Bs", "has_B", "ints", "msg_off", "A_clip"}
