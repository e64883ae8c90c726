"""Model runners: who runs memoryd's two kinds of model call (see :mod:`memoryd.runner.base`)."""
