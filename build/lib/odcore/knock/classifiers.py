"""The four classifiers of Pyrgelis et al. 2018, §V-B and Appendix A (scikit-learn).

- ``lr``: logistic regression with the liblinear coordinate-descent solver;
- ``knn``: k-nearest neighbours, k = 5, Euclidean distance;
- ``rf``: random forest of 30 trees, Gini, all features considered at each split (``max_features=None``);
- ``mlp``: multi-layer perceptron, one hidden layer of 200 units, Adam (stochastic gradient) optimiser, on
  standardised features (the paper standardises for the MLP only).
"""

from __future__ import annotations

import warnings
from enum import StrEnum

import numpy as np

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


def make_classifier(name: Classifier | str, seed: int | None = None, n_jobs: int = 2):
    """A fresh, unfitted scikit-learn estimator with the paper's settings."""
    name = Classifier(name)
    if name == Classifier.LR:
        from sklearn.linear_model import LogisticRegression

        return LogisticRegression(solver="liblinear")
    if name == Classifier.KNN:
        from sklearn.neighbors import KNeighborsClassifier

        return KNeighborsClassifier(n_neighbors=5, metric="euclidean")
    if name == Classifier.RF:
        from sklearn.ensemble import RandomForestClassifier

        return RandomForestClassifier(n_estimators=30, criterion="gini", max_features=None, n_jobs=n_jobs,
                                      random_state=seed)
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), MLPClassifier(hidden_layer_sizes=(200,), solver="adam",
                                                         max_iter=200, random_state=seed))


def fit_scores(name: Classifier | str, x_train: np.ndarray, y_train: np.ndarray, x_tests: list[np.ndarray],
               seed: int | None = None, n_jobs: int = 2, blas_threads: int = 1) -> list[np.ndarray]:
    """Fit on the training set and return the membership score (P[in]) of each test matrix in ``x_tests``.

    k-NN with fewer than 5 training samples uses all of them. Convergence warnings of the MLP (200 epochs, as in
    scikit-learn's default) are silenced: the score is what the game evaluates.
    """
    from sklearn.exceptions import ConvergenceWarning

    y = np.asarray(y_train)
    if len(np.unique(y)) < 2:
        raise ParameterError("training labels hold a single class; the game needs in- and out-groups.")
    from threadpoolctl import threadpool_limits

    est = make_classifier(name, seed=seed, n_jobs=n_jobs)
    if Classifier(name) == Classifier.KNN and len(y) < 5:
        est.set_params(n_neighbors=len(y))
    # The matrices here are small (hundreds of samples): multi-threaded BLAS only adds synchronisation, and on a
    # busy 2-core machine it made the MLP 10x slower (9.3 s vs 0.9 s for 74 epochs), so BLAS runs single-threaded.
    with warnings.catch_warnings(), threadpool_limits(limits=blas_threads, user_api="blas"):
        warnings.simplefilter("ignore", category=ConvergenceWarning)
        est.fit(x_train, y)
        classes = list(est.classes_)
        col = classes.index(1)
        # round away BLAS rounding noise: identical inputs must get identical scores (ties are ties in the ROC)
        return [np.round(est.predict_proba(x)[:, col], 10) for x in x_tests]
