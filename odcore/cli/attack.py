"""``python -m odcore user-risk`` (the membership attack against a thresholded release, :mod:`odcore.privacy.attack`).

``user-risk`` loads traces, builds one week of unique OD pairs and prints, for every user of that week, the exact
success of the membership attack against the *thresholded* release (suppressed pairs included in the observation
model), the effective k and the summary quantiles.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from odcore.cli import print_json
from odcore.cli.common import od_from_args, require_pairs
from odcore.constants import COUNT, DESTINATION, ORIGIN, USER, WEEK
from odcore.errors import ParameterError
from odcore.od.pairs import bound_contributions
from odcore.privacy import attack
from odcore.privacy.release import Mode, ReleaseConfig


def run_user_risk(args: argparse.Namespace) -> int:
    cfg = ReleaseConfig(epsilon=args.epsilon, threshold=args.threshold, mode=args.mode, max_pairs=args.max_pairs)
    if args.resolution < 2:
        raise ParameterError(f"--resolution must be >= 2, got {args.resolution}.")
    _traces, od = od_from_args(args)
    require_pairs(od, "user-risk scores each person from their own pairs")
    pairs = od.pairs
    weeks = sorted(int(w) for w in pairs[WEEK].unique())
    if args.week not in weeks:
        raise ParameterError(f"--week {args.week} has no trips in {args.input}; weeks with trips: {weeks}.")
    pairs = pairs.loc[pairs[WEEK] == args.week]
    counts = od.counts
    bounding = None
    if cfg.mode is Mode.USER_LEVEL:
        pairs, bounding = bound_contributions(pairs, cfg.max_pairs, rng=args.seed)
        counts = None  # counts of the bounded data
    eps_pair = 1.0 / cfg.scale
    if args.fast:
        risk, report = attack.week_risk(pairs, args.week, eps_pair, cfg.threshold, counts=counts)
    else:
        risk, report = attack.week_risk(pairs, args.week, eps_pair, cfg.threshold, counts=counts,
                                        resolution=args.resolution, extrapolate=True)
    summary = attack.risk_summary(risk)
    out: dict = {
        "input": str(args.input), "week": args.week, "week_start": od.week_starts[args.week],
        "release": cfg.to_dict(), "epsilon_per_pair": eps_pair,
        "bound": attack.posterior_bound(eps_pair), "summary": summary, "report": report,
    }
    if bounding is not None:
        out["bounding"] = bounding
    if args.user is not None:
        out["user"] = _user_detail(args.user, pairs, counts, args.week, eps_pair, cfg.threshold, USER, args.prior)
    out["users"] = {
        "user": risk[USER].tolist(), "k": risk["k"].tolist(), "k_informative": risk["k_informative"].tolist(),
        "effective_k": np.round(risk["effective_k"].to_numpy(), 6).tolist(),
        "success": risk["success"].tolist(), "error_bound": risk["error_bound"].tolist(),
    }
    if args.json:
        print_json(out)
        return 0
    q = summary["quantiles"]
    print(f"week {args.week} ({out['week_start']}): {summary['users']} users, epsilon {cfg.epsilon:g} "
          f"(per pair {eps_pair:g}), threshold {cfg.threshold:g}")
    print(f"attack success: median {q['median']:.4f}, p90 {q['p90']:.4f}, max {q['max']:.4f}; "
          f"share of users above 90%: {summary['share_above_90pct']:.2%} "
          f"(per-metric bound e^eps/(1+e^eps) = {out['bound']:.4f})")
    print(f"median k {summary['median_k']:g}, median effective k {summary['median_effective_k']:.2f}")
    top = risk.sort_values("success", ascending=False).head(10)
    print("most exposed users:  user  k  effective_k  success")
    for row in top.itertuples(index=False):
        print(f"  {getattr(row, USER)!s:>10}  {row.k:3d}  {row.effective_k:8.2f}  {row.success:.4f}")
    if "user" in out:
        u = out["user"]
        print(f"user {u['user']}: k {u['k']}, success {u['success']:.6f} in [{u['success_low']:.6f}, "
              f"{u['success_high']:.6f}], effective k {u['effective_k']:.2f}, TPR at FPR 1% "
              f"{u['roc']['tpr_at_fpr_1pct']:.4f}, at 0.1% {u['roc']['tpr_at_fpr_0.1pct']:.4f}")
    return 0


def _user_detail(user_arg: str, pairs, counts, week: int, eps: float, tau: float, user_col: str,
                 prior: float | None = None) -> dict:
    users = pairs[user_col]
    match = users.astype(str) == str(user_arg)
    if not match.any():
        sample = ", ".join(map(str, users.drop_duplicates().head(5).tolist()))
        raise ParameterError(f"--user {user_arg!r} has no pairs in week {week} (e.g. users: {sample}).")
    own = pairs.loc[match, [ORIGIN, DESTINATION]]
    if counts is None:
        cnt = pairs.groupby([ORIGIN, DESTINATION]).size().rename(COUNT).reset_index()
    else:
        cnt = counts.loc[counts[WEEK] == week, [ORIGIN, DESTINATION, COUNT]]
    others = own.merge(cnt, on=[ORIGIN, DESTINATION], how="left")[COUNT].to_numpy(dtype=float) - 1.0
    if np.any(~np.isfinite(others)):
        raise ParameterError(f"--user {user_arg!r}: a pair of this user has no count in week {week}.")
    r = attack.user_risk(others, eps, tau, roc=True, prior=prior)
    if prior is not None:
        d_prior = {"prior": float(prior), "posterior_bound_per_metric": attack.posterior_bound(eps, prior)}
    d = r.to_dict()
    d["user"] = str(user_arg)
    if prior is not None:
        d.update(d_prior)
    d["plain_success_same_k"] = float(attack.success_curve(eps, r.k)[-1]) if r.k <= 2000 else math.nan
    return d
