"""One tolerance table for the whole suite (absolute, against pymdp 1.0.4), with the reason for each."""

# float32: pymdp and we contract in a different order (einsum paths, merged sums); rounding differs by a
# few ulps per contraction and accumulates over num_iter <= 16 iterations -> well under 1e-5.
FLOAT32_ATOL = 1e-5
# Exception, measured: VMP/MMP with tau > 1 (over-relaxed mirror descent) is ill-conditioned; float32
# rounding is amplified over iterations. On a skewed model with exact zeros, tau=1.7, 16 iterations:
# pymdp float32 vs pymdp float64 differ by 6.3e-5 (ours float32: 4.5e-5; ours float64 vs pymdp float64:
# 3.7e-15). In float64 the same growth shows on a 7-factor VMP model (jax 0.6.2): tau 0.8 -> 3e-16,
# 1.0 -> 3e-13, 1.1 -> 1.2e-12, 1.25 -> 2e-10. So float32 oracle checks use tau <= 1 and the
# over-relaxed case (tau = 1.1) is checked in float64.
# float32 quantities not bounded by 1 (log-messages, unnormalised transition products): the same rounding,
# relative to their size.
FLOAT32_RTOL = 1e-5
# float64: same reasoning at double precision.
FLOAT64_ATOL = 1e-10
# float64 bookkeeping compared with a recomputation of itself (regret means, log10 size ratios against a
# threshold): summation order only.
FLOAT64_BOOKKEEPING_ATOL = 1e-9
# fused_numba (numba kernels) in float64, VMP/MMP on the ill-conditioned oracle case (a 10-factor modality, 30%
# exact zeros in A, non-default B-dependencies, 6 iterations), measured: MMP 1.0e-10, VMP 2.8e-11 from pymdp,
# where the JAX variants reach 7e-12 / 2.4e-13 and the JAX baseline's MMP 1.7e-11. Its kernels evaluate exp/log
# with the C library, pymdp and every JAX variant with XLA's own approximations, and sum in plain loop order; on
# well-conditioned cases it matches pymdp to 3e-12 or better (FPI everywhere, VMP/MMP with default
# B-dependencies). The amplification is the case's, not the kernel's: we did not find a bug behind it.
NATIVE_FLOAT64_ATOL = 5e-10
# Beliefs that crossed a ROS topic are float32 (Belief.probabilities is float32[]), the engine may run in
# float32 too: one rounding to float32 on top of FLOAT32_ATOL.
ROS_FLOAT32_ATOL = 2e-5
# Golden values over a whole episode (bayes_infer_ros.bags.golden: our engine vs pymdp, and pymdp's padded
# window vs its truncated windows), float32: fpi feeds each tick's float32 prediction into the next tick's
# prior, so rounding carries from tick to tick. Measured on the tests' 8-step episodes (4 seeds, tiny model,
# 8 iterations): fpi 1.8e-7, mmp 1.2e-7, padded vs truncated 6e-8; the per-call float32 bound covers it.
GOLDEN_FLOAT32_ATOL = FLOAT32_ATOL
# A probability (<= 1) stored as float32 (a message field, a bag) and read back as float64: at most half a
# float32 ulp of 1.
FLOAT32_STORAGE_ATOL = 2.0 ** -24
# The same engine on the same inputs twice (a replay's second pass, after the node's reset to D): the programs
# are deterministic on the CPU; one float32 rounding of slack.
REPEAT_ATOL = 1e-6
# Posterior-mode accuracy (fraction of steps whose argmax is the true state) of two belief series that agree
# to ROS_FLOAT32_ATOL: they may pick different modes where a belief has two near-equal maxima; allow this many
# such steps.
ACCURACY_TIE_STEPS = 2
# Free energy and surprise (nats, not bounded by 1: sums of log terms down to ln(MINVAL) = -36 over the modalities
# and factors), against pymdp's calc_vfe on the same posterior: the absolute tolerance of the dtype plus the same
# rounding relative to the value's size.
FREE_ENERGY_FLOAT32_RTOL = FLOAT32_RTOL
FREE_ENERGY_FLOAT64_RTOL = 1e-12


def free_energy_tolerance(dtype) -> tuple[float, float]:
    """(rtol, atol) of a free energy, one of its terms, or a surprise in ``dtype`` against pymdp."""
    import numpy as np

    if np.dtype(dtype) == np.float64:
        return FREE_ENERGY_FLOAT64_RTOL, FLOAT64_ATOL
    return FREE_ENERGY_FLOAT32_RTOL, FLOAT32_ATOL


def sampling_atol(draws: int) -> float:
    """Empirical frequency from ``draws`` seeded samples vs its probability: five standard errors of a
    Bernoulli mean at its widest (p = 1/2). The draws are seeded, so a test using it cannot flake."""
    return 5.0 * 0.5 / draws ** 0.5


def atol_for(dtype) -> float:
    import numpy as np

    return FLOAT64_ATOL if np.dtype(dtype) == np.float64 else FLOAT32_ATOL
