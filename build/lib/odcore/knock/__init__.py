"""Knock Knock: membership inference on aggregate location time-series and DP defences.

Pyrgelis, Troncoso, De Cristofaro, "Knock Knock, Who's There? Membership Inference on Aggregate Location Data",
NDSS 2018. Modules: :mod:`~odcore.knock.timeseries` (L_u, aggregates), :mod:`~odcore.knock.game` (priors),
:mod:`~odcore.knock.features`, :mod:`~odcore.knock.classifiers`, :mod:`~odcore.knock.metrics`,
:mod:`~odcore.knock.defences`, :mod:`~odcore.knock.experiment` (``KnockConfig``, ``run_experiment``, ``mre_table``).
"""

from odcore.knock.classifiers import Classifier
from odcore.knock.defences import Clip, DefenceConfig, Mechanism, TransformNorm, perturb
from odcore.knock.experiment import (
    KnockConfig,
    KnockResult,
    MREConfig,
    TargetResult,
    mre_table,
    run_experiment,
)
from odcore.knock.features import Selection, extract_features
from odcore.knock.game import GameConfig, Prior, make_game
from odcore.knock.timeseries import GridKind, LocationTimeSeries, ROIGrid, TimeSeriesConfig, build_timeseries

__all__ = [
    "Classifier", "Clip", "DefenceConfig", "GameConfig", "GridKind", "KnockConfig", "KnockResult",
    "LocationTimeSeries", "MREConfig", "Mechanism", "Prior", "ROIGrid", "Selection", "TargetResult",
    "TimeSeriesConfig", "TransformNorm", "build_timeseries", "extract_features", "make_game", "mre_table",
    "perturb", "run_experiment",
]
