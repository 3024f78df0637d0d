"""Elementwise rules: ufuncs and the functions NumPy builds from them."""
import numpy as np

from ..registry import defvjp

defvjp(np.add, lambda g, ans, x, y: g, lambda g, ans, x, y: g)
defvjp(np.subtract, lambda g, ans, x, y: g, lambda g, ans, x, y: -g)
defvjp(np.multiply, lambda g, ans, x, y: g * y, lambda g, ans, x, y: g * x)
defvjp(np.true_divide, lambda g, ans, x, y: g / y, lambda g, ans, x, y: -g * ans / y)
defvjp(np.negative, lambda g, ans, x: -g)
defvjp(np.positive, lambda g, ans, x: g)
defvjp(np.sin, lambda g, ans, x: g * np.cos(x))
defvjp(np.cos, lambda g, ans, x: -g * np.sin(x))
defvjp(np.exp, lambda g, ans, x: g * ans)
defvjp(np.log, lambda g, ans, x: g / x)
defvjp(np.tanh, lambda g, ans, x: g * (1.0 - ans * ans))
