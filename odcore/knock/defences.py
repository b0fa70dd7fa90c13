"""Differentially private defences for aggregate location time-series (Pyrgelis et al. 2018, §VII-A).

Every mechanism takes aggregates of shape ``(..., T)`` (one series per group and ROI, time last) and returns a
noisy copy of the same shape. Sensitivities (§VII-B): Δ = the largest number of ROI reports of any user in the
inference period is the L1 sensitivity of the aggregate matrix (a user changes at most Δ cells by one), so its L2
sensitivity is ``Δ₂ = sqrt(Δ)``.

- ``lpa``: Laplace noise of scale Δ/ε on every cell (user-level ε-DP).
- ``lpa-event``: Laplace of scale 1/ε, the event-level baseline (protects single visits only).
- ``gsm``: Gaussian with ``σ = sqrt(2·ln(2/δ))·Δ₂/ε`` (the paper's formula, (ε, δ)-DP).
- ``fpa`` (Rastogi & Nath 2010): per series, keep the first κ DFT coefficients, add ``Lap(sqrt(κ)·Δ₂/ε)`` to the
  real and imaginary parts, pad with zeros, invert.
- ``efpag`` (Ács & Castelluccia 2014): per series, DCT; choose κ with the exponential mechanism (budget ε/2,
  score = −(RSS of the dropped coefficients + expected noise error sqrt(κ)·σ), score sensitivity Δ₂); add Gaussian
  noise of ``σ = sqrt(2·ln(2/δ))·Δ₂/(ε/2)`` to the κ kept coefficients; invert.

Transforms are orthonormal (``norm="ortho"``) so that Δ₂ in the signal domain is Δ₂ in the coefficient domain,
which is what the privacy proofs need. ``TransformNorm.BACKWARD`` instead applies the noise to the *unnormalised*
coefficients of numpy's / scipy's default FFT and DCT (equivalent to dividing the noise by ``sqrt(T)`` resp.
``sqrt(2T)``): that is not differentially private at the stated ε, and is offered only to show the magnitude of
errors an implementation with default transform scaling reports (see docs/knock_knock_results.md).

Post-processing (free under DP): ``Clip.GROUP`` clips to ``[0, m]`` (a count of m users cannot leave that range),
``Clip.NONNEG`` to ``[0, ∞)``. Table II/III of the paper saturate for small ε, which suggests such clipping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from scipy.fft import dct, idct
from scipy.special import softmax

from odcore.errors import ParameterError, check_positive, coerce_enum


class Mechanism(StrEnum):
    LPA = "lpa"
    LPA_EVENT = "lpa-event"
    GSM = "gsm"
    FPA = "fpa"
    EFPAG = "efpag"


ALL_MECHANISMS: tuple[Mechanism, ...] = tuple(Mechanism)


class Clip(StrEnum):
    NONE = "none"
    NONNEG = "nonneg"
    GROUP = "group"


class TransformNorm(StrEnum):
    ORTHO = "ortho"
    BACKWARD = "backward"


@dataclass(frozen=True)
class DefenceConfig:
    """One defence with its parameters.

    Parameters
    ----------
    mechanism:
        :class:`Mechanism`.
    epsilon:
        Privacy parameter ε > 0.
    sensitivity:
        Δ, the L1 sensitivity (max ROI reports of a user in the inference period), > 0.
    delta:
        δ for ``gsm`` and ``efpag`` (paper: 0.1).
    l2_sensitivity:
        Δ₂; default ``sqrt(Δ)``.
    kappa:
        Number of DFT coefficients kept by ``fpa`` (paper SFC: 20, TFL: 25).
    clip:
        Post-processing :class:`Clip` (default ``group``: clip to ``[0, m]``).
    norm:
        :class:`TransformNorm` for ``fpa``/``efpag``.
    round_counts:
        Post-processing: round the released values to integers (after clipping).
    """

    mechanism: Mechanism
    epsilon: float
    sensitivity: float
    delta: float = 0.1
    l2_sensitivity: float | None = None
    kappa: int = 20
    clip: Clip = Clip.GROUP
    norm: TransformNorm = TransformNorm.ORTHO
    round_counts: bool = False

    def __post_init__(self) -> None:
        for name, enum in (("mechanism", Mechanism), ("clip", Clip), ("norm", TransformNorm)):
            coerce_enum(self, name, enum)
        object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon))
        object.__setattr__(self, "sensitivity", check_positive("sensitivity", self.sensitivity))
        if not 0 < self.delta < 1:
            raise ParameterError(f"delta must be in (0, 1), got delta={self.delta}.")
        if self.l2_sensitivity is not None:
            object.__setattr__(self, "l2_sensitivity", check_positive("l2_sensitivity", self.l2_sensitivity))
        if int(self.kappa) != self.kappa or self.kappa < 1:
            raise ParameterError(f"kappa must be an integer >= 1, got kappa={self.kappa!r}.")

    @property
    def delta2(self) -> float:
        """Δ₂ (default ``sqrt(Δ)``)."""
        return float(self.l2_sensitivity) if self.l2_sensitivity is not None else math.sqrt(self.sensitivity)

    def scales(self) -> dict[str, float]:
        """The noise parameters this configuration uses (before any transform-norm adjustment)."""
        m = self.mechanism
        if m == Mechanism.LPA:
            return {"laplace_scale": self.sensitivity / self.epsilon}
        if m == Mechanism.LPA_EVENT:
            return {"laplace_scale": 1.0 / self.epsilon}
        if m == Mechanism.GSM:
            return {"sigma": gaussian_sigma(self.epsilon, self.delta, self.delta2)}
        if m == Mechanism.FPA:
            return {"laplace_scale": math.sqrt(self.kappa) * self.delta2 / self.epsilon, "kappa": self.kappa}
        return {"sigma": gaussian_sigma(self.epsilon / 2, self.delta, self.delta2),
                "selection_epsilon": self.epsilon / 2}


def gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float) -> float:
    """σ = sqrt(2·ln(2/δ))·Δ₂/ε, as printed in Pyrgelis et al. 2018 §VII-A (GSM).

    >>> round(gaussian_sigma(1.0, 0.1, 1.0), 4)
    2.4477
    """
    return math.sqrt(2.0 * math.log(2.0 / delta)) * l2_sensitivity / epsilon


def _clip(x: np.ndarray, clip: Clip, group_size: int | None) -> np.ndarray:
    if clip == Clip.NONE:
        return x
    if clip == Clip.NONNEG or group_size is None:
        return np.maximum(x, 0.0, out=x)
    return np.clip(x, 0.0, float(group_size), out=x)


def fpa(x: np.ndarray, kappa: int, scale: float, rng: np.random.Generator | int | None = None, *,
        noise_divisor: float = 1.0) -> np.ndarray:
    """Fourier Perturbation Algorithm on each series along the last axis (Rastogi & Nath 2010).

    Keeps the first ``kappa`` coefficients of the orthonormal real DFT, adds ``Lap(scale)`` (divided by
    ``noise_divisor``) to their real and imaginary parts (the imaginary part of the mean term is dropped by the
    inverse), zero-pads and inverts.
    """
    rng = np.random.default_rng(rng)
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[-1]
    f = np.fft.rfft(x, axis=-1, norm="ortho")
    k = min(int(kappa), f.shape[-1])
    kept = f[..., :k]
    noise = rng.laplace(0.0, scale, (*kept.shape, 2)) / noise_divisor
    g = np.zeros_like(f)
    g[..., :k] = kept + noise[..., 0] + 1j * noise[..., 1]
    return np.fft.irfft(g, n=n, axis=-1, norm="ortho")


def _efpag_basis(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The orthonormal DCT-II coefficients of each series and ``tail[k-1] = sqrt(Σ_{i≥k} c_i²)``, k = 1..T (they do
    not depend on ε or the seed: :func:`perturb` reuses them through its ``memo``)."""
    c = dct(x, type=2, axis=-1, norm="ortho")
    sq = c * c
    rev = np.cumsum(sq[..., ::-1], axis=-1)[..., ::-1]
    tail = np.sqrt(np.concatenate([rev[..., 1:], np.zeros((*sq.shape[:-1], 1))], axis=-1))
    return c, tail


def efpag(x: np.ndarray, epsilon: float, delta: float, l2_sensitivity: float,
          rng: np.random.Generator | int | None = None, *, noise_divisor: float = 1.0,
          return_kappa: bool = False, basis: tuple[np.ndarray, np.ndarray] | None = None
          ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """EFPA with Gaussian noise (Ács & Castelluccia 2014) on each series along the last axis.

    Half of ε selects κ ∈ {1..T} by the exponential mechanism with probability ∝ exp(−ε₁·err(κ)/(2Δ₂)),
    ``err(κ) = sqrt(Σ_{i≥κ} c_i²) + sqrt(κ)·σ`` (the tail's root-sum-square changes by at most Δ₂ between
    neighbours); sampled for all series at once with the Gumbel-max trick. The other half calibrates the Gaussian
    noise ``σ`` added to the κ kept orthonormal-DCT coefficients (L2 sensitivity Δ₂, no sqrt(κ) factor). ``basis``:
    the :func:`_efpag_basis` of ``x`` if already computed.
    """
    rng = np.random.default_rng(rng)
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[-1]
    eps1 = eps2 = epsilon / 2
    sigma = gaussian_sigma(eps2, delta, l2_sensitivity) / noise_divisor
    c, tail = _efpag_basis(x) if basis is None else basis
    ks = np.arange(1, n + 1)
    err = tail + np.sqrt(ks) * sigma
    logits = -eps1 * err / (2.0 * l2_sensitivity)
    gumbel = rng.gumbel(size=logits.shape)
    kappa = np.argmax(logits + gumbel, axis=-1) + 1
    keep = np.arange(n) < kappa[..., None]
    noisy = np.where(keep, c + rng.normal(0.0, sigma, c.shape), 0.0)
    out = idct(noisy, type=2, axis=-1, norm="ortho")
    return (out, kappa) if return_kappa else out


def efpag_kappa_probabilities(series: np.ndarray, epsilon: float, delta: float, l2_sensitivity: float) -> np.ndarray:
    """Exact selection probabilities of κ = 1..T for one series (for tests and plots)."""
    c = dct(np.asarray(series, dtype=float), type=2, norm="ortho")
    n = len(c)
    rev = np.cumsum((c * c)[::-1])[::-1]
    tail = np.sqrt(np.r_[rev[1:], 0.0])
    err = tail + np.sqrt(np.arange(1, n + 1)) * gaussian_sigma(epsilon / 2, delta, l2_sensitivity)
    return softmax(-(epsilon / 2) * err / (2.0 * l2_sensitivity))


def perturb(agg: np.ndarray, config: DefenceConfig, rng: np.random.Generator | int | None = None, *,
            group_size: int | None = None, memo: dict | None = None) -> np.ndarray:
    """Apply ``config``'s mechanism to every series of ``agg`` (time on the last axis); fresh noise per call.

    Parameters
    ----------
    agg:
        Raw aggregates, e.g. ``(n_groups, n_rois, T)``.
    config:
        :class:`DefenceConfig`.
    rng:
        Seed or generator.
    group_size:
        ``m``, the upper bound for ``Clip.GROUP`` (without it, clipping is to ``[0, ∞)``).
    memo:
        A dict kept by a caller that perturbs the same ``agg`` many times (e.g. at several ε): what does not depend
        on ε or the noise is computed once and kept there. Same output with or without it.
    """
    rng = np.random.default_rng(rng)
    x = np.asarray(agg, dtype=np.float64)
    s = config.scales()
    mech = config.mechanism
    n = x.shape[-1]
    if mech in (Mechanism.LPA, Mechanism.LPA_EVENT):
        out = rng.laplace(0.0, s["laplace_scale"], x.shape)
        out += x
    elif mech == Mechanism.GSM:
        out = rng.normal(0.0, s["sigma"], x.shape)
        out += x
    elif mech == Mechanism.FPA:
        div = math.sqrt(n) if config.norm == TransformNorm.BACKWARD else 1.0
        out = fpa(x, config.kappa, s["laplace_scale"], rng, noise_divisor=div)
    else:
        div = math.sqrt(2 * n) if config.norm == TransformNorm.BACKWARD else 1.0
        basis = None
        if memo is not None:
            if "efpag_basis" not in memo:
                memo["efpag_basis"] = _efpag_basis(x)
            basis = memo["efpag_basis"]
        out = efpag(x, config.epsilon, config.delta, config.delta2, rng, noise_divisor=div, basis=basis)
    out = _clip(out, config.clip, group_size)
    return np.rint(out, out=out) if config.round_counts else out
