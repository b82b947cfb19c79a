"""``mx.sym.random``: random draws in graphs (``uniform``, ``normal``, ...).

>>> import engine as mx
>>> mx.sym.random.uniform(low=0, high=1, shape=(2, 3)).infer_shape()[1]
[(2, 3)]
"""

from __future__ import annotations

from typing import Any

from ..build import make_generic

# mx.sym.random.<name> -> the operator it creates (sample_* when given symbol parameters)
_DRAWS = {"uniform": "uniform", "normal": "normal", "exponential": "exponential",
          "gamma": "gamma", "poisson": "poisson", "negative_binomial": "negative_binomial",
          "generalized_negative_binomial": "generalized_negative_binomial",
          "randint": "randint"}


def _draw(kind: str) -> Any:
    def draw(*args: Any, name: str | None = None, attr: Any = None, **kwargs: Any) -> Any:
        from ..symbol import Symbol

        symbolic = [a for a in list(args) + list(kwargs.values()) if isinstance(a, Symbol)]
        op = f"sample_{kind}" if symbolic else f"random_{kind}"
        return make_generic(op, args, kwargs, name, attr)

    draw.__name__ = kind
    draw.__doc__ = f"MXNet's ``mx.sym.random.{kind}``."
    return draw


uniform = _draw("uniform")
normal = _draw("normal")
exponential = _draw("exponential")
gamma = _draw("gamma")
poisson = _draw("poisson")
negative_binomial = _draw("negative_binomial")
generalized_negative_binomial = _draw("generalized_negative_binomial")
randint = _draw("randint")


def multinomial(data: Any, shape: Any = (), get_prob: bool = False, dtype: str = "int32",
                name: str | None = None, **kwargs: Any) -> Any:
    return make_generic("sample_multinomial", (data,), {"shape": shape, "get_prob": get_prob,
                                                        "dtype": dtype, **kwargs}, name)


def shuffle(data: Any, name: str | None = None, **kwargs: Any) -> Any:
    return make_generic("shuffle", (data,), kwargs, name)
