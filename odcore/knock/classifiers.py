"""The four classifiers of Pyrgelis et al. 2018, §V-B and Appendix A (scikit-learn).

- ``lr``: logistic regression with the liblinear coordinate-descent solver;
- ``knn``: k-nearest neighbours, k = 5, Euclidean distance;
- ``rf``: random forest of 30 trees, Gini, all features considered at each split (``max_features=None``);
- ``mlp``: multi-layer perceptron, one hidden layer of 200 units, Adam (stochastic gradient) optimiser, on
  standardised features (the paper standardises for the MLP only). The paper gives no epoch count or stopping
  rule; scikit-learn's defaults are kept (at most 200 epochs, stop when the training loss has not improved by 1e-4
  for 10 epochs: about 70-90 epochs on the SFC games).

The MLP trains in float32 by default (``float32=True``): the features are standardised in float64, the network's
weights and gradients are float32, which halves the cost of its matrix products. Its scores are then computed in
float64 from the trained weights, so that confident outputs near 0 or 1 keep their order (a float32 sigmoid rounds
them to ties). On the SFC games the float32 and float64 networks stop after the same number of epochs and give the
same AUC to 1e-3 (``tests/odcore/knock/test_knock_experiment.py``).
"""

from __future__ import annotations

import warnings
from enum import StrEnum

import numpy as np
from scipy.special import expit
from sklearn.ensemble import RandomForestClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler
from threadpoolctl import threadpool_limits

from odcore.errors import ParameterError


class Classifier(StrEnum):
    LR = "lr"
    KNN = "knn"
    RF = "rf"
    MLP = "mlp"


ALL_CLASSIFIERS: tuple[Classifier, ...] = (Classifier.LR, Classifier.KNN, Classifier.RF, Classifier.MLP)


def parse_classifiers(value: str | list | tuple) -> tuple[Classifier, ...]:
    """``"lr,knn"`` or a list -> tuple of :class:`Classifier` (order kept, duplicates removed)."""
    items = [v.strip() for v in value.split(",")] if isinstance(value, str) else list(value)
    out: list[Classifier] = []
    for v in items:
        if v == "":
            continue
        try:
            c = Classifier(v)
        except ValueError:
            raise ParameterError(f"unknown classifier {v!r}; expected some of {[c.value for c in Classifier]}.") \
                from None
        if c not in out:
            out.append(c)
    if not out:
        raise ParameterError("classifiers must name at least one of lr, knn, rf, mlp.")
    return tuple(out)


def as_float32(x: np.ndarray) -> np.ndarray:
    """``x`` as float32 (the MLP pipeline's step between scaling and the network)."""
    return np.asarray(x, dtype=np.float32)


def make_classifier(name: Classifier | str, seed: int | None = None, n_jobs: int = 2, *, float32: bool = True):
    """A fresh, unfitted scikit-learn estimator with the paper's settings (``float32``: the MLP's precision)."""
    name = Classifier(name)
    if name == Classifier.LR:
        return LogisticRegression(solver="liblinear")
    if name == Classifier.KNN:
        return KNeighborsClassifier(n_neighbors=5, metric="euclidean")
    if name == Classifier.RF:
        return RandomForestClassifier(n_estimators=30, criterion="gini", max_features=None, n_jobs=n_jobs,
                                      random_state=seed)
    mlp = MLPClassifier(hidden_layer_sizes=(200,), solver="adam", max_iter=200, random_state=seed)
    if float32:
        return make_pipeline(StandardScaler(), FunctionTransformer(as_float32), mlp)
    return make_pipeline(StandardScaler(), mlp)


def mlp_scores(pipe, x: np.ndarray) -> np.ndarray:
    """P[in] of a fitted binary MLP pipeline (:func:`make_classifier`), its forward pass in float64.

    The same arithmetic as ``predict_proba`` (ReLU hidden layers, logistic output), with the weights of either
    precision promoted to float64, so that scores near 0 or 1 do not collapse to float32 ties.
    """
    mlp = pipe[-1]
    if mlp.activation != "relu" or mlp.out_activation_ != "logistic":
        raise ParameterError(f"mlp_scores needs a ReLU network with a logistic output, got activation="
                             f"{mlp.activation!r}, output {mlp.out_activation_!r}.")
    z = pipe[0].transform(np.asarray(x, dtype=np.float64))
    for i, (w, b) in enumerate(zip(mlp.coefs_, mlp.intercepts_, strict=True)):
        z = z @ w.astype(np.float64) + b.astype(np.float64)
        if i < len(mlp.coefs_) - 1:
            np.maximum(z, 0.0, out=z)
    p1 = expit(z[:, 0])
    return p1 if list(mlp.classes_).index(1) == 1 else 1.0 - p1


def fit_scores(name: Classifier | str, x_train: np.ndarray, y_train: np.ndarray, x_tests: list[np.ndarray],
               seed: int | None = None, n_jobs: int = 2, blas_threads: int = 1, float32: bool = True
               ) -> list[np.ndarray]:
    """Fit on the training set and return the membership score (P[in]) of each test matrix in ``x_tests``.

    ``float32`` trains the MLP in single precision (see the module notes); the other classifiers are unaffected.

    k-NN with fewer than 5 training samples uses all of them. Convergence warnings of the MLP (200 epochs, as in
    scikit-learn's default) are silenced: the score is what the game evaluates.
    """
    y = np.asarray(y_train)
    if len(np.unique(y)) < 2:
        raise ParameterError("training labels hold a single class; the game needs in- and out-groups.")
    est = make_classifier(name, seed=seed, n_jobs=n_jobs, float32=float32)
    if Classifier(name) == Classifier.KNN and len(y) < 5:
        est.set_params(n_neighbors=len(y))
    # The matrices here are small (hundreds of samples): multi-threaded BLAS only adds synchronisation, and on a
    # busy 2-core machine it made the MLP 10x slower (9.3 s vs 0.9 s for 74 epochs), so BLAS runs single-threaded.
    with warnings.catch_warnings(), threadpool_limits(limits=blas_threads, user_api="blas"):
        warnings.simplefilter("ignore", category=ConvergenceWarning)
        est.fit(x_train, y)
        if Classifier(name) == Classifier.MLP:
            scores = [mlp_scores(est, x) for x in x_tests]
        else:
            col = list(est.classes_).index(1)
            scores = [est.predict_proba(x)[:, col] for x in x_tests]
        # round away BLAS rounding noise: identical inputs must get identical scores (ties are ties in the ROC)
        return [np.round(s, 10) for s in scores]
