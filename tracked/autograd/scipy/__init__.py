"""``tracked.autograd.scipy``: autograd's own SciPy extensions (``signal.convolve``); SciPy's
functions themselves are in ``tracked.scipy``."""
