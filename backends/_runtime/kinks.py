"""Where an op is not differentiable: read by the host (a failing gradient there is tagged, a convention
rather than necessarily a bug: irtrace.ir.semantics.kink_tag) and by the float64 oracle (its finite-difference
check moves no input that sits on such a point: every one-sided choice is a valid gradient there, and a
difference quotient across it measures none of them). Workers cannot import irtrace: the table lives here."""
import numpy as np

from backends._runtime.wire import is_float

# zero: a kink at input 0 == 0;  tie: max/min selects among equal values;  bounds: clip edges
KINKS = {"Relu": "zero", "LeakyRelu": "zero", "PRelu": "zero", "Abs": "zero", "Sign": "zero",
         "Max": "tie", "Min": "tie", "MaxPool": "tie", "ReduceMax": "tie", "ReduceMin": "tie",
         "GlobalMaxPool": "tie", "TopK": "tie", "ArgMax": "tie", "Clip": "bounds", "HardSigmoid": "bounds",
         "HardSwish": "bounds", "Sqrt": "zero"}


def kinked(op_type, inputs):
    """Per input, a boolean mask of its elements on a non-differentiable point of the op (an exact zero of
    input 0, a value repeated in input 0 or equal across Max/Min's inputs, an element at a Clip bound), or
    None for an input with none; None for an op without kinks."""
    kind = KINKS.get(op_type)
    if kind is None or not inputs or inputs[0] is None:
        return None
    xs = [None if a is None else np.asarray(a) for a in inputs]
    x = xs[0]
    masks = [None] * len(xs)
    if kind == "zero":
        masks[0] = x == 0
    elif kind == "tie" and op_type in ("Max", "Min"):
        floats = [k for k, a in enumerate(xs) if a is not None and is_float(a.dtype)]
        for k in floats:
            masks[k] = np.zeros(xs[k].shape, bool)
            for j in floats:
                if j != k:
                    try:
                        masks[k] |= _reduce_to(np.equal(xs[k], xs[j]), xs[k].shape)
                    except ValueError:  # shapes that do not broadcast: the op itself refuses them
                        pass
    elif kind == "tie":
        flat = x.reshape(-1)
        _, inverse, counts = np.unique(flat, return_inverse=True, return_counts=True)
        masks[0] = (counts[inverse] > 1).reshape(x.shape) & ~np.isnan(x)
    elif kind == "bounds" and op_type == "Clip":
        masks[0] = np.zeros(x.shape, bool)
        for b in xs[1:3]:
            if b is not None and np.size(b):
                masks[0] |= x == b
    return masks if any(m is not None and m.any() for m in masks) else None


def _reduce_to(m, shape):
    """A broadcast boolean mask `m` folded onto an operand of `shape`: true where any position it fed is."""
    lead = m.ndim - len(shape)
    m = m.any(axis=tuple(range(lead))) if lead > 0 else m
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and m.shape[i] != 1)
    return m.any(axis=axes, keepdims=True) if axes else m
