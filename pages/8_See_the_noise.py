"""See the noise: what gets published for one true count (Laplace noise around it, the threshold, suppression)."""

from __future__ import annotations

import streamlit as st

from odapp.live import view as live_view
from odapp.shared import charts, guide, projector
from odapp.shared.errors import engine_errors
from odapp.shared.export import button_row, code_caption, export_buttons
from odapp.shared.layout import metric, page
from odapp.shared.styling import projector_mode
from odapp.shared.words import pct
from odcore.report.teaching import noise_picture

ctx = page(
    "See the noise",
    "Every published count is the true number of people **plus random noise**, and it is published only if the "
    "noisy number reaches the threshold. Drag the true count and ε to see what comes out: a number a few people "
    "off, or nothing at all.",
    icon="🎲",
)
guide.panel(__file__, ctx)
s = ctx.settings
ss = st.session_state
# The true count and ε are dragged on the picture itself (odapp.live.view.noise); ε starts at the sidebar's.
ss.setdefault("noise_count", 120)
ss.setdefault("noise_eps", float(s.epsilon))
count, eps = int(ss["noise_count"]), float(ss["noise_eps"])
c1, c3 = st.columns([1, 2])
per_user = c3.toggle("Per-user mode (noise max pairs / ε)", value=s.mode == "user_level", key="noise_per_user",
                     help="The per-user release bounds each person to a number of pairs and divides ε among them: "
                          "noise of scale max pairs/ε on every count.")
m = int(s.max_pairs)
if per_user and not projector.on():
    m = int(c3.number_input("Max pairs per person", 1, 200, int(s.max_pairs), key="noise_max_pairs",
                            help="The per-user contribution bound (starts at the sidebar's value)."))
other = int(count) - 25 if int(count) - 25 >= 0 else int(count) + 25
if not projector.on():
    other = c1.number_input("A second count to compare", 0, 1000, max(int(s.threshold) - 5, 0), 1,
                            key="noise_other", help="Shown as a second curve and a second sentence.")
sens = m if per_user else 1
with engine_errors("Could not draw the noise", "Check ε and the threshold."):
    pic = noise_picture(count, eps, s.threshold, sensitivity=sens)
    pic2 = noise_picture(other, eps, s.threshold, sensitivity=sens)

live_view.noise(count, int(other), eps, s.threshold, sens, other_follows=projector.on())
fig, table = charts.noise_chart(count, other, eps, s.threshold, sens, projector=projector_mode())
row = button_row()   # there in both modes, so what follows keeps its place (updated, not rebuilt)
if not projector_mode():   # the picture at the page's count and ε, as files (plotly)
    export_buttons("noise_picture", fig=fig, data=table, key="noise_picture", row=row)

st.info(pic.sentence() + "  \n" + pic2.sentence(), icon=":material/campaign:")
c = st.columns(4)
metric(c[0], "Published", pct(pic.p_published), f"a count of {count} (release probability)",
       help="P(c + noise ≥ threshold): odcore.privacy.release.release_probability, the release's own rule.")
metric(c[1], "Suppressed", pct(1 - pic.p_published), f"below the threshold of {s.threshold:g}",
       help="The pair is removed from the release when its noisy count is below the threshold.")
metric(c[2], "95 % of weeks between", f"{pic.low:.1f} – {pic.high:.1f}", f"noise scale {pic.scale:.3g} people",
       help="The central 95 % range of c + Laplace noise: c ± scale·ln 20.")
metric(c[3], f"A count of {other}", pct(pic2.p_published), "published",
       help="The same for the second count.")

code_caption("Computed by `odcore.report.teaching.noise_picture` from the release's mechanism: Laplace noise of scale "
           "sensitivity/ε, published iff the noisy count ≥ threshold (`odcore.privacy.release.release_probability`).")
