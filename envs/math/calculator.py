"""A safe calculator: arithmetic on an expression's syntax tree, never ``eval`` of model text.

Allowed: numbers, ``+ - * / // % **``, parentheses, unary signs, the functions in :data:`FUNCTIONS`
and the constants ``pi`` and ``e``. Powers, digit counts and expression length are bounded, so a
model cannot make the calculator hang or eat memory (``9**9**9`` is refused, not computed).

Example:
    >>> evaluate("2 * (3 + 4) - 10 / 4")
    '11.5'
    >>> evaluate("sqrt(16) + 2**10")
    '1028'
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from fractions import Fraction
from typing import Any

MAX_EXPRESSION_CHARS = 2_000
MAX_EXPONENT = 10_000
MAX_INT_DIGITS = 4_000

Number = int | float | Fraction

FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": round,
    "floor": math.floor,
    "ceil": math.ceil,
    "exp": math.exp,
    "log": math.log,
    "log2": math.log2,
    "log10": math.log10,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "factorial": math.factorial,
    "gcd": math.gcd,
    "lcm": math.lcm,
    "min": min,
    "max": max,
}
CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


class CalculatorError(ValueError):
    """An expression the calculator will not evaluate; the message is written for the model."""


def _check_size(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_DIGITS * 3.33:
        raise CalculatorError(f"the result has more than {MAX_INT_DIGITS} digits")
    return value


def _evaluate(node: ast.AST) -> Any:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and isinstance(right, (int, float, Fraction)) and abs(right) > MAX_EXPONENT:
            raise CalculatorError(f"exponents above {MAX_EXPONENT} are not allowed")
        if isinstance(node.op, ast.Div) and isinstance(left, int) and isinstance(right, int) and right != 0:
            quotient = Fraction(left, right)  # exact, so 10/4*4 is 10 and not 9.999...
            return quotient.numerator if quotient.denominator == 1 else quotient
        return _check_size(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.Name) and node.id in CONSTANTS:
        return CONSTANTS[node.id]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in FUNCTIONS
        and not node.keywords
    ):
        arguments = [_evaluate(argument) for argument in node.args]
        if node.func.id == "factorial" and arguments and isinstance(arguments[0], int) and arguments[0] > 1000:
            raise CalculatorError("factorial is limited to 1000!")
        return _check_size(FUNCTIONS[node.func.id](*arguments))
    if isinstance(node, ast.Name):
        raise CalculatorError(f"unknown name `{node.id}`; known: {', '.join([*FUNCTIONS, *CONSTANTS])}")
    raise CalculatorError(f"`{ast.unparse(node)}` is not arithmetic this calculator supports")


def format_number(value: Number) -> str:
    """Print a result the way a person would: integers without ``.0``, fractions as decimals."""
    if isinstance(value, Fraction):
        value = float(value)
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 1e16:
            return str(int(value))
        return repr(round(value, 12))
    return str(value)


def evaluate(expression: str) -> str:
    """Evaluate an arithmetic expression and format the result.

    Raises:
        CalculatorError: for anything that is not bounded arithmetic, with a reason for the model.
    """
    expression = expression.strip().replace("^", "**").replace("×", "*").replace("÷", "/")
    if not expression:
        raise CalculatorError("empty expression")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as error:
        raise CalculatorError(f"cannot parse `{expression[:80]}`: {error.msg}") from None
    try:
        return format_number(_evaluate(tree))
    except ZeroDivisionError:
        raise CalculatorError("division by zero") from None
    except (OverflowError, ValueError, TypeError) as error:
        if isinstance(error, CalculatorError):
            raise
        raise CalculatorError(f"{type(error).__name__}: {error}") from None
    except RecursionError:
        raise CalculatorError("expression nested too deeply") from None
