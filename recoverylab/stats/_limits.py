"""Size limits of the statistics: batch memory, exact enumeration, lattices, the scipy path.

The tunable bounds every topic module reads at call time (``_limits.MAX_LATTICE``), kept in one
place so that a limit has one value across modules. They decide *how* a number is computed
(batch sizes, exact or Monte Carlo), never what it is: batching leaves results unchanged, and a
method switch is named in the result (``p_method``). Tests lower them through the package
namespace (``monkeypatch.setattr(stats, "_MAX_LATTICE", 50)``), which forwards here.
"""

#: Upper bound on the elements of one resampling batch (resamples × types), to bound memory.
MAX_BATCH_ELEMENTS = 5_000_000

#: Largest number of nonzero clusters whose 2**n sign vectors are enumerated exactly.
MAX_ENUMERATION = 20

#: Largest lattice (support of the summed null distribution) built for the exact convolution.
MAX_LATTICE = 2**23

#: Below this product of lengths np.convolve is exact and cheap; above it, FFT convolution.
DIRECT_CONVOLVE_MAX = 4_000_000

#: Most nonzero clusters sent to ``scipy.stats.permutation_test`` (it materialises every
#: resample × cluster); above, the per-type draws are much faster.
SCIPY_MC_MAX_CLUSTERS = 1_000
