"""``python -m odcore attack-curve`` and ``python -m odcore user-risk`` (the membership attack, :mod:`odcore.privacy.attack`).

``attack-curve`` prints the exact success ``p_k`` of Houssiau et al.'s membership attack for ``k = 0..k_max``
(optionally with the paper's Monte Carlo next to it). ``user-risk`` loads traces, builds one week of unique OD
pairs and prints, for every user of that week, the exact success of the same attack against the *thresholded*
release (suppressed pairs included in the observation model), the effective k and the summary quantiles.
"""

from __future__ import annotations

import argparse
import math

from odcore.errors import ParameterError


def register(sub: argparse._SubParsersAction) -> None:
    pc = sub.add_parser(
        "attack-curve", help="exact success p_k of the membership attack for k = 0..k_max (+ Monte Carlo)",
        description="Exact success of the optimal membership attack of Houssiau et al. 2022 (perfect knowledge of "
                    "everyone else, equal priors) on a user with k unique weekly trips: 1/2 + 1/2 TV between "
                    "Lap(0,1/eps)^k and Lap(1,1/eps)^k, with the bound e^eps/(1+e^eps) of the per-metric guarantee.")
    pc.add_argument("--epsilon", type=float, default=0.66, help="Laplace epsilon (default %(default)s)")
    pc.add_argument("--k-max", type=int, default=70, help="largest k (default %(default)s, as in the paper)")
    pc.add_argument("--monte-carlo", type=int, default=None, metavar="N",
                    help="also run the paper's Monte Carlo with N repetitions per k (the paper: 10000)")
    pc.add_argument("--seed", type=int, default=None, help="random seed of the Monte Carlo")
    pc.add_argument("--prior", type=float, default=0.5,
                    help="prior probability that the user is in (default %(default)s); != 0.5 adds the "
                         "Bayes-optimal success and posterior bound for that prior")
    pc.add_argument("--tpr", action="store_true",
                    help="also the optimal attacker's TPR at FPR 1%% and 0.1%% for every k (exact ROC points)")
    pc.add_argument("--mode", default="per_metric", choices=["per_metric", "user_level"],
                    help="user_level adds the success against the per-person (bounded) release, noise "
                         "max_pairs/eps on min(k, max_pairs) counts (default %(default)s)")
    pc.add_argument("--max-pairs", type=int, default=None, help="contribution bound of --mode user_level")
    pc.add_argument("--json", action="store_true", help="print JSON instead of text")
    pc.set_defaults(func=run_curve)

    pu = sub.add_parser(
        "user-risk", help="attack success for every user of one week of a thresholded release",
        description="Per user of one week: number of unique pairs k, informative pairs, exact success of the "
                    "optimal membership attack against the Laplace + threshold release (a pair is observed as "
                    "'suppressed' or as its noisy count), the effective k (k of the plain curve with the same "
                    "success), and the distribution over users (share facing > 90%% success).")
    from odcore.cli.common import add_grid_args, add_loader_args, add_release_args

    add_loader_args(pu)
    add_grid_args(pu)
    g = pu.add_argument_group("release and attack")
    add_release_args(g)
    g.add_argument("--week", type=int, default=0, help="week number (default %(default)s)")
    g.add_argument("--seed", type=int, default=None, help="seed of the user-level pair sampling")
    g.add_argument("--resolution", type=int, default=64,
                   help="loss grid points per epsilon (default %(default)s, with Richardson extrapolation: error ~1e-6)")
    g.add_argument("--fast", action="store_true",
                   help="dashboard mode: resolution 16 without extrapolation (error <= ~5e-5, upward)")
    g.add_argument("--user", default=None,
                   help="detail for one user: exact success with bounds and the ROC (TPR at FPR 1%%, 0.1%%)")
    g.add_argument("--prior", type=float, default=None,
                   help="with --user: also the Bayes-optimal success when the user is in with this prior")
    g.add_argument("--json", action="store_true", help="print JSON instead of text")
    pu.set_defaults(func=run_user_risk)


# ---------------------------------------------------------------------------------------------------------------
# attack-curve
# ---------------------------------------------------------------------------------------------------------------

def run_curve(args: argparse.Namespace) -> int:
    import numpy as np

    from odcore.cli import print_json
    from odcore.privacy import attack

    if args.monte_carlo is not None:   # refuse too much work before doing any
        from odcore.data.params import check_monte_carlo_work

        check_monte_carlo_work(args.monte_carlo, args.k_max)
    curve = attack.success_curve(args.epsilon, args.k_max)
    eps = float(args.epsilon)
    out: dict = {"epsilon": eps, "k": list(range(args.k_max + 1)), "success": curve.tolist(),
                 "bound": attack.posterior_bound(eps, 0.5)}
    above = np.nonzero(curve > out["bound"])[0]
    out["first_k_above_bound"] = int(above[0]) if above.size else None   # Houssiau et al.: 3 at ε = 0.66
    out["unit"] = "per count"
    if getattr(args, "mode", "per_metric") == "user_level":
        if args.max_pairs is None:
            raise ParameterError("--mode user_level needs --max-pairs (an integer >= 1).")
        out.update({"unit": "per person and week", "max_pairs": int(args.max_pairs),
                    "success_per_person": attack.bounded_success_curve(eps, args.max_pairs, args.k_max).tolist()})
    elif getattr(args, "max_pairs", None) is not None:
        raise ParameterError(f"--max-pairs={args.max_pairs} needs --mode user_level.")
    if args.prior != 0.5:
        out["prior"] = float(args.prior)
        out["bayes_success"] = np.asarray(
            attack.bayes_success(np.arange(args.k_max + 1), eps, args.prior)).tolist()
        out["posterior_bound"] = attack.posterior_bound(eps, args.prior)
    if args.tpr:
        tpr = attack.tpr_curve(eps, args.k_max, (0.01, 0.001))
        out["tpr_at_fpr_1pct"] = tpr[:, 0].tolist()
        out["tpr_at_fpr_0.1pct"] = tpr[:, 1].tolist()
    if args.monte_carlo is not None:
        sim = attack.simulate_attack(eps, np.arange(args.k_max + 1), reps=args.monte_carlo, rng=args.seed)
        out.update({"mc_reps": sim.reps, "mc_seed": args.seed, "mc_success": sim.success.tolist(),
                    "mc_ci_low": sim.ci_low.tolist(), "mc_ci_high": sim.ci_high.tolist()})
    if args.json:
        print_json(out)
        return 0
    print(f"membership attack, epsilon={eps:g}: bound e^eps/(1+e^eps) = {out['bound']:.4f}, exceeded from "
          f"k = {out['first_k_above_bound']}")
    head = "k     exact"
    if "success_per_person" in out:
        head += f"  per person (max_pairs {out['max_pairs']})"
    if "mc_success" in out:
        head += "     MC     95% CI"
    if "bayes_success" in out:
        head += f"   prior {args.prior:g}"
    if "tpr_at_fpr_1pct" in out:
        head += "   TPR@1%  TPR@0.1%"
    print(head)
    for i, k in enumerate(out["k"]):
        line = f"{k:<5d} {out['success'][i]:.4f}"
        if "success_per_person" in out:
            line += f"  {out['success_per_person'][i]:.4f}"
        if "mc_success" in out:
            line += f"   {out['mc_success'][i]:.4f} [{out['mc_ci_low'][i]:.4f}, {out['mc_ci_high'][i]:.4f}]"
        if "bayes_success" in out:
            line += f"   {out['bayes_success'][i]:.4f}"
        if "tpr_at_fpr_1pct" in out:
            line += f"   {out['tpr_at_fpr_1pct'][i]:.4f}  {out['tpr_at_fpr_0.1pct'][i]:.4f}"
        print(line)
    return 0


# ---------------------------------------------------------------------------------------------------------------
# user-risk
# ---------------------------------------------------------------------------------------------------------------

def run_user_risk(args: argparse.Namespace) -> int:
    import numpy as np

    from odcore.cli import print_json
    from odcore.cli.common import od_from_args, require_pairs
    from odcore.constants import USER, WEEK
    from odcore.od.pairs import bound_contributions
    from odcore.privacy import attack
    from odcore.privacy.release import Mode, ReleaseConfig

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
    import numpy as np

    from odcore.constants import COUNT, DESTINATION, ORIGIN, WEEK
    from odcore.privacy import attack

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
