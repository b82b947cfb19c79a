"""``engine.metric``: MXNet 1.9's evaluation metrics (``mx.metric``).

>>> import engine as mx
>>> m = mx.metric.create(['acc', 'ce'])
>>> m.update([mx.nd.array([1, 0])], [mx.nd.array([[0.2, 0.8], [0.6, 0.4]])])
>>> m.get_name_value()[0]
('accuracy', 1.0)
"""

from .arrays import check_label_shapes
from .base import (
    METRICS,
    CompositeEvalMetric,
    CustomMetric,
    EvalMetric,
    alias,
    create,
    np,
    register,
)
from .classification import F1, MCC, PCC, Accuracy, TopKAccuracy
from .probability import Caffe, CrossEntropy, Loss, NegativeLogLikelihood, Perplexity, Torch
from .regression import MAE, MSE, RMSE, PearsonCorrelation

__all__ = [
    "METRICS", "MAE", "MCC", "MSE", "PCC", "RMSE", "Accuracy", "Caffe", "CompositeEvalMetric",
    "CrossEntropy", "CustomMetric", "EvalMetric", "F1", "Loss", "NegativeLogLikelihood",
    "PearsonCorrelation", "Perplexity", "TopKAccuracy", "alias", "check_label_shapes",
    "create", "np", "register", "Torch",
]
