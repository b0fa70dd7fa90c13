"""``python -m odcore attack-curve``: the exact success ``p_k`` of Houssiau et al.'s membership attack for
``k = 0..k_max`` (:mod:`odcore.privacy.attack_curve`), optionally with the paper's Monte Carlo next to it, the
Bayes-optimal success for another prior and the attacker's TPR at low FPR. numpy only: the command starts fast.
"""

from __future__ import annotations

import argparse

import numpy as np

from odcore.cli import print_json
from odcore.data.params import check_monte_carlo_work
from odcore.errors import ParameterError
from odcore.privacy import attack_curve


def run_curve(args: argparse.Namespace) -> int:
    if args.monte_carlo is not None:   # refuse too much work before doing any
        check_monte_carlo_work(args.monte_carlo, args.k_max)
    curve = attack_curve.success_curve(args.epsilon, args.k_max)
    eps = float(args.epsilon)
    out: dict = {"epsilon": eps, "k": list(range(args.k_max + 1)), "success": curve.tolist(),
                 "bound": attack_curve.posterior_bound(eps, 0.5)}
    above = np.nonzero(curve > out["bound"])[0]
    out["first_k_above_bound"] = int(above[0]) if above.size else None   # Houssiau et al.: 3 at ε = 0.66
    out["unit"] = "per count"
    if getattr(args, "mode", "per_metric") == "user_level":
        if args.max_pairs is None:
            raise ParameterError("--mode user_level needs --max-pairs (an integer >= 1).")
        out.update({"unit": "per person and week", "max_pairs": int(args.max_pairs),
                    "success_per_person": attack_curve.user_level_success_curve(eps, args.max_pairs, args.k_max).tolist()})
    elif getattr(args, "max_pairs", None) is not None:
        raise ParameterError(f"--max-pairs={args.max_pairs} needs --mode user_level.")
    if args.prior != 0.5:
        out["prior"] = float(args.prior)
        out["bayes_success"] = np.asarray(
            attack_curve.bayes_success(np.arange(args.k_max + 1), eps, args.prior)).tolist()
        out["posterior_bound"] = attack_curve.posterior_bound(eps, args.prior)
    if args.tpr:
        tpr = attack_curve.tpr_curve(eps, args.k_max, (0.01, 0.001))
        out["tpr_at_fpr_1pct"] = tpr[:, 0].tolist()
        out["tpr_at_fpr_0.1pct"] = tpr[:, 1].tolist()
    if args.monte_carlo is not None:
        sim = attack_curve.simulate_attack(eps, np.arange(args.k_max + 1), reps=args.monte_carlo, rng=args.seed)
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
