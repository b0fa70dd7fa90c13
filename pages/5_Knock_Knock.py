"""Knock Knock: machine-learning membership inference on aggregate location time-series, and DP defences."""

from __future__ import annotations

import functools

import pandas as pd
import streamlit as st

from odapp.knock import cache as knock_cache
from odapp.shared import ahead, callbacks, charts, page_work
from odapp.shared.cli_config import command_line, knock_config
from odapp.shared.errors import engine_errors
from odapp.shared.export import chart, export_buttons, opened_expander
from odapp.shared.layout import metric, needs_pairs, page
from odapp.shared.styling import projector_mode
from odapp.shared.words import AREAS_WORD, pct, probability_words
from odcore.knock import (
    Classifier,
    KnockConfig,
    Mechanism,
    Prior,
    TimeSeriesConfig,
    run_experiment,
)

RESULTS_KEY = "knock.results"   # session_state: {(dataset id, KnockConfig): KnockResult}
PRIOR_HELP = {
    Prior.SUBSET: "knows the hourly locations of a fraction α of all users, the target included (§IV-A 1)",
    Prior.SAME_GROUPS: "knows past aggregates of the very groups that are released (§IV-A 2a; needs ≥ 2 weeks)",
    Prior.DIFFERENT_GROUPS: "knows past aggregates of other groups (§IV-A 2b; needs ≥ 2 weeks)",
    Prior.PERFECT: "knows the released groups' aggregates except the target's part (§VII-B worst case)",
}

ctx = page(
    "Knock Knock",
    "Instead of OD pairs, publish for a **group of m people** how many of them are in each of 100 areas, hour by "
    "hour. Pyrgelis et al. (NDSS 2018) train classifiers to tell whether a target is in the group from those "
    "aggregates alone. An AUC of 0.5 means the attacker learns nothing; 1.0 means they always know. DP "
    "defences add noise to the aggregates, at a price in accuracy (the MRE table).",
    icon="🚪",
    headline=False,   # the OD release's guarantee card is not this game's: its ε is the defence's, set below
)
needs_pairs(ctx, "Knock Knock (it needs each person's traces)")
s = ctx.settings
ts_config = TimeSeriesConfig(tz=ctx.loaded.tz)
with engine_errors("Could not build the location time-series", "Load data with at least one full week."):
    ts = knock_cache.knock_series(s.dataset.id, ts_config, _df=ctx.loaded.df)
summ = ts.summary()
left_out = int(ts.report.get("users_dropped_no_report_in_rois", 0))
people_note = (f" (of {summ['users'] + left_out:,} in the data: {left_out:,} with no hourly location inside the "
               "areas are left out, as the paper drops 2 cabs)" if left_out else "")
st.caption(f"{summ['users']:,} users{people_note} · {summ['rois'] - 1} {AREAS_WORD} (ROIs; one more slot holds “elsewhere”) · {summ['slots']:,} hourly slots "
           f"({summ['slots'] // 168} full weeks) · grid cells of {summ['grid']['cell_km2']:.1f} km²")

with st.form("knock_form"):
    c = st.columns(4)
    prior = c[0].selectbox("Adversary's prior knowledge", [p.value for p in Prior], key="knock_prior",
                           help="; ".join(f"{p.value}: {h}" for p, h in PRIOR_HELP.items()))
    m = c[1].number_input("Group size m", 2, 10_000, 100, step=10, key="knock_m",
                          help="People per released aggregate. The paper uses 5 to 9,500; small groups leak more.")
    targets = c[2].number_input("Targets", 1, 150, 3, key="knock_targets",
                                help="Target users, drawn equally from high, mild and low mobility. The paper uses "
                                     "150; 3 finishes in well under a minute here.")
    classifiers = c[3].multiselect("Classifiers", [x.value for x in Classifier], default=["lr", "rf"],
                                   key="knock_classifiers",
                                   help="lr logistic regression, knn nearest neighbours, rf random forest, mlp "
                                        "neural network (slowest).")
    c = st.columns(4)
    defence = c[0].selectbox("DP defence", ["none"] + [x.value for x in Mechanism], key="knock_defence",
                             help="Noise added to the released aggregates (§VII): lpa Laplace per value, gsm "
                                  "Gaussian, fpa Fourier, efpag the paper's EFPA-G; lpa-event protects one report.")
    eps = c[1].number_input("ε of the defence", 0.001, 100.0, 1.0, format="%.3f", key="knock_eps",
                            help="Privacy parameter of the defence (the paper: 0.01 to 10). Ignored without one.")
    train_noisy = c[2].toggle("Strategic adversary", value=False, key="knock_train_noisy",
                              help="The attacker also trains on noisy aggregates (§VII-B case 2).")
    with c[3].popover("Game sizes"):
        n_train = st.number_input("Training groups", 20, 2000, 200, step=20, key="knock_ntrain",
                                  help="Subset prior: groups per class to train on (paper: 400).")
        n_test = st.number_input("Test groups", 10, 1000, 50, step=10, key="knock_ntest",
                                 help="Subset prior: groups to test on (paper: 100).")
        alpha = st.slider("α (subset prior)", 0.05, 1.0, 0.2, 0.05, key="knock_alpha",
                          help="Fraction of all users whose locations the attacker knows.")
    run = st.form_submit_button("Run the experiment", type="primary",
                                help="Play the distinguishability game for every target and classifier.")

with engine_errors("Invalid experiment settings"):
    kcfg = KnockConfig(prior=prior, m=int(m), alpha=float(alpha), targets=int(targets),
                       classifiers=tuple(classifiers) or ("lr",), defence=None if defence == "none" else defence,
                       epsilon=float(eps) if defence != "none" else None, train_on_noisy=bool(train_noisy),
                       seed=int(s.seed), n_train=int(n_train), n_test=int(n_test))
results = st.session_state.setdefault(RESULTS_KEY, {})
key = (s.dataset.id, ts_config, kcfg)
if run:
    bar = st.progress(0.0, text="Starting…")

    def progress(done: int, total: int, message: str) -> None:
        bar.progress(done / max(total, 1), text=f"{done}/{total} · {message}")

    with engine_errors("The experiment could not run", "Try another prior, a smaller m or more data weeks."):
        results[key] = run_experiment(ts, kcfg, progress=progress)
    bar.empty()
res = results.get(key)
cli_cfg = knock_config(kcfg, s, ctx.loaded)
if res is None:
    st.info("Press **Run the experiment**. With the defaults (3 targets, 2 classifiers) it takes 10–30 s.")
else:
    st.subheader("Results")
    mean_auc = res.mean_auc
    c = st.columns(4)
    best = mean_auc.get("best", float("nan"))
    metric(c[0], "Mean AUC, best classifier", f"{best:.3f}",
           probability_words(best).replace("right", "able to tell"),
           help="Per target, the best classifier's AUC, averaged over targets (the paper's BEST).")
    metric(c[1], "Mean privacy loss", pct(res.mean_pl.get("best", float("nan"))),
           help="PL = (AUC − 0.5)/0.5 (Eq. 3): 0 = nothing learnt, 100 % = membership always inferred.")
    metric(c[2], "Targets", f"{len(res.per_target)}", f"Δ = {res.sensitivity} (sensitivity)")
    metric(c[3], "Time", f"{res.seconds:.1f} s")
    rows = [{"target": t.target, "mobility": t.mobility, "reports": t.reports, "classifier": k, "auc": v,
             "pl": t.pl[k], **({"auc_raw": t.auc_raw[k], "pg": t.pg[k]} if t.auc_raw else {})}
            for t in res.per_target for k, v in t.auc.items()]
    per = pd.DataFrame(rows)
    left, right = st.columns(2)
    with left:
        fig = charts.knock_cdf_chart(per, projector=projector_mode())
        chart(fig, "knock_auc_cdf", data=per, config=cli_cfg, command="knock", key="knock_cdf")
    with right:
        fig = charts.knock_pl_chart(per, projector=projector_mode())
        chart(fig, "knock_pl_box", data=per, config=cli_cfg, command="knock", key="knock_pl")
    left, right = st.columns(2)
    with left:
        tnames = [t.target for t in res.per_target]
        tsel = st.selectbox("Target for the ROC", tnames, key="knock_roc_target",
                            format_func=functools.partial(callbacks.knock_target,
                                                          {x.target: x.mobility for x in res.per_target}),
                            help="Whose game to show: one ROC curve per classifier.")
        tres = next(t for t in res.per_target if t.target == tsel)
        fig = charts.knock_roc_chart(tres.roc, tres.auc, tsel, projector=projector_mode())
        roc_rows = [{"classifier": name, "fpr": a, "tpr": b} for name, r in tres.roc.items()
                    for a, b in zip(r["fpr"], r["tpr"], strict=True)]
        chart(fig, f"knock_roc_{tsel}", data=pd.DataFrame(roc_rows), config=cli_cfg, command="knock",
              key="knock_roc")
    with right:
        st.markdown("**Per target**")
        st.dataframe(per.pivot_table(index=["target", "mobility"], columns="classifier", values="auc").reset_index(),
                     hide_index=True, width="stretch")
        if res.mre is not None:
            st.markdown(f"MRE of the released aggregates under {kcfg.defence.value} at ε = {kcfg.epsilon:g}: "
                        f"**{res.mre:.3g}**. Mean privacy gain: "
                        + ", ".join(f"{k.upper()} {v:.2f}" for k, v in (res.mean_pg or {}).items()))

st.subheader("What the defences cost: mean relative error (MRE)")
work = functools.partial(page_work.knock_mre, ts_config=ts_config, m=int(m))
with engine_errors("Could not compute the MRE table"):
    mre = work(ctx)
mre_df = pd.DataFrame(mre["mre"]).T.rename_axis("mechanism").reset_index()
st.dataframe(mre_df, hide_index=True, width="content",
             column_config={c: st.column_config.NumberColumn(f"ε = {c}", format="%.3g") for c in mre_df.columns[1:]})
st.caption(f"Mean over {mre['n_groups']} random groups of m = {mre['m']} and every area of |noisy − true| / "
           f"max(true, γ) (§VII-C, Tables II/III; Δ = {mre['sensitivity']}). A value of 1 means errors as large as "
           "the counts themselves.")
export_buttons("knock_mre", data=mre_df, key="knock_mre")

full_cli = opened_expander("Run the full experiment from the command line", "knock_full_cli")
if full_cli is not None:
    with full_cli:
        st.markdown("The paper's setting (150 targets, all four classifiers, RFE feature selection) takes hours; run "
                    "it from a shell, on the same data and settings:")
        full = {**cli_cfg, "targets": 150, "classifiers": "lr,knn,rf,mlp", "selection": "rfe", "n_train": 400,
                "n_test": 100}
        st.code(command_line("knock", full) + " --json > knock_full.json", language="bash")
        st.caption("`python -m odcore defences` prints the MRE table (Tables II/III) for the same data.")
ahead.after(ctx, work)   # the next seed, while the person reads this one
