"""``neuron-profile predict``: a distributed training run on Trainium predicted from dry runs (docs/simulation.md)."""
from neuron_profiler.predict.api import MODEL_VERSION, Prediction, predict
from neuron_profiler.predict.config import ConfigError, PredictConfig

__all__ = ["predict", "Prediction", "PredictConfig", "ConfigError", "MODEL_VERSION"]
