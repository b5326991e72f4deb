import tensorflow as tf

from backends._ops_common import register_variadic
from backends.tensorflow.ops import OPS
from backends.tensorflow.ops._util import ONNX_TO_TF

OPS.register("Add", since=7)(lambda a, b: tf.math.add(a, b))
OPS.register("Sub", since=7)(lambda a, b: tf.math.subtract(a, b))
OPS.register("Mul", since=7)(lambda a, b: tf.math.multiply(a, b))
OPS.register("Equal", since=7)(lambda a, b: tf.math.equal(a, b))
OPS.register("Less", since=7)(lambda a, b: tf.math.less(a, b))
OPS.register("LessOrEqual", since=7)(lambda a, b: tf.math.less_equal(a, b))
OPS.register("Greater", since=7)(lambda a, b: tf.math.greater(a, b))
OPS.register("GreaterOrEqual", since=7)(lambda a, b: tf.math.greater_equal(a, b))
OPS.register("And", since=7)(lambda a, b: tf.math.logical_and(a, b))
OPS.register("Or", since=7)(lambda a, b: tf.math.logical_or(a, b))
OPS.register("Xor", since=7)(lambda a, b: tf.math.logical_xor(a, b))


@OPS.register("Div", since=7)
def div(a, b):
    if a.dtype.is_floating:
        return tf.math.divide(a, b)
    return tf.math.truncatediv(a, b)  # ONNX integer Div truncates (tf's // floors)


@OPS.register("Pow", since=7)
def pow_(x, y):
    return tf.math.pow(x, tf.cast(y, x.dtype))  # tf.pow wants one dtype; ONNX lets the exponent differ


@OPS.register("Mod", since=10)
def mod(a, b, *, fmod=0):
    return tf.truncatemod(a, b) if fmod else tf.math.floormod(a, b)  # fmod=0: the sign of the divisor


OPS.register("Sqrt", since=6)(lambda x: tf.math.sqrt(x))
OPS.register("Reciprocal", since=6)(lambda x: tf.math.reciprocal(x))
OPS.register("Neg", since=6)(lambda x: tf.math.negative(x))
OPS.register("Abs", since=6)(lambda x: tf.math.abs(x))
OPS.register("Exp", since=6)(lambda x: tf.math.exp(x))
OPS.register("Log", since=6)(lambda x: tf.math.log(x))
OPS.register("Erf", since=9)(lambda x: tf.math.erf(x))
OPS.register("Sin", since=7)(lambda x: tf.math.sin(x))
OPS.register("Cos", since=7)(lambda x: tf.math.cos(x))
OPS.register("Tan", since=7)(lambda x: tf.math.tan(x))
OPS.register("Tanh", since=6)(lambda x: tf.math.tanh(x))
OPS.register("Sigmoid", since=6)(lambda x: tf.math.sigmoid(x))
OPS.register("Relu", since=6)(lambda x: tf.nn.relu(x))
OPS.register("Floor", since=6)(lambda x: tf.math.floor(x))
OPS.register("Ceil", since=6)(lambda x: tf.math.ceil(x))
OPS.register("Round", since=11)(lambda x: tf.math.round(x))  # both round half to even
OPS.register("Sign", since=9)(lambda x: tf.math.sign(x))
OPS.register("Not", since=1)(lambda x: tf.math.logical_not(x))
OPS.register("IsNaN", since=9)(lambda x: tf.math.is_nan(x))
OPS.register("Identity", since=1)(lambda x: tf.identity(x))
OPS.register("Softplus", since=1)(lambda x: tf.math.softplus(x))
OPS.register("Softsign", since=1)(lambda x: tf.nn.softsign(x))
OPS.register("Atan", since=7)(lambda x: tf.math.atan(x))
OPS.register("Asin", since=7)(lambda x: tf.math.asin(x))
OPS.register("Acos", since=7)(lambda x: tf.math.acos(x))
OPS.register("Sinh", since=9)(lambda x: tf.math.sinh(x))
OPS.register("Cosh", since=9)(lambda x: tf.math.cosh(x))
OPS.register("Asinh", since=9)(lambda x: tf.math.asinh(x))
OPS.register("Acosh", since=9)(lambda x: tf.math.acosh(x))
OPS.register("Atanh", since=9)(lambda x: tf.math.atanh(x))
OPS.register("Mish", since=18)(lambda x: x * tf.math.tanh(tf.math.softplus(x)))  # TensorFlow has no mish: its formula


@OPS.register("IsInf", since=10)
def is_inf(x, *, detect_negative=1, detect_positive=1):
    inf = tf.math.is_inf(x)
    neg = tf.math.logical_and(inf, x < 0) if detect_negative else tf.zeros_like(inf)
    pos = tf.math.logical_and(inf, x > 0) if detect_positive else tf.zeros_like(inf)
    return tf.math.logical_or(neg, pos)


@OPS.register("LeakyRelu", since=6)
def leaky_relu(x, *, alpha=0.01):
    return tf.nn.leaky_relu(x, alpha=alpha)


@OPS.register("PRelu", since=9)
def prelu(x, slope):
    return tf.nn.relu(x) - slope * tf.nn.relu(-x)  # TF has no prelu op: this is keras.layers.PReLU's formula


@OPS.register("Elu", since=6)
def elu(x, *, alpha=1.0):
    if alpha == 1.0:
        return tf.nn.elu(x)
    return tf.where(x > 0, x, alpha * tf.math.expm1(x))  # tf.nn.elu has no alpha: a porter scales the negative side


@OPS.register("Selu", since=6)
def selu(x, *, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875):
    return gamma * tf.where(x > 0, x, alpha * tf.math.expm1(x))  # tf.nn.selu's constants are fixed: written out


@OPS.register("Gelu", since=20)
def gelu(x, *, approximate="none"):
    return tf.nn.gelu(x, approximate=approximate == "tanh")


@OPS.register("HardSigmoid", since=6)
def hard_sigmoid(x, *, alpha=0.2, beta=0.5):
    return tf.clip_by_value(alpha * x + beta, 0.0, 1.0)


@OPS.register("HardSwish", since=14)
def hard_swish(x):
    return x * tf.nn.relu6(x + 3.0) / 6.0  # keras.activations.hard_swish's formula


@OPS.register("Clip", since=11)
def clip(x, lo=None, hi=None):
    if lo is None and hi is None:
        return tf.identity(x)
    lo = lo if lo is not None else x.dtype.min
    hi = hi if hi is not None else x.dtype.max
    return tf.clip_by_value(x, lo, hi)


register_variadic(OPS, "Max", tf.math.maximum)
register_variadic(OPS, "Min", tf.math.minimum)
register_variadic(OPS, "Sum", tf.math.add)


@OPS.register("Where", since=9)
def where(c, x, y):
    return tf.where(c, x, y)  # TF2's where broadcasts all three, as ONNX does


@OPS.register("Cast", since=6)
def cast(x, *, to, saturate=1, round_mode="up"):
    return tf.cast(x, ONNX_TO_TF[to])


@OPS.register("CastLike", since=15)
def cast_like(x, like, *, saturate=1, round_mode="up"):
    return tf.cast(x, like.dtype)


@OPS.register("Dropout", since=12)
def dropout(x, ratio=None, training_mode=None, *, seed=None):
    if training_mode is not None and bool(training_mode):
        raise ValueError("Dropout with training_mode=1 draws a fresh mask; irtrace replays recorded masks only")
    return tf.identity(x), tf.ones_like(x, dtype=tf.bool)


@OPS.register("RecordedDropout", domain="ai.irtrace")
def recorded_dropout(x, mask, *, ratio):
    # tf.nn.dropout draws its own mask; replaying a recorded one, a porter scales as it does: x * mask / (1 - rate)
    return x * (tf.cast(mask, x.dtype) / (1.0 - ratio)) if ratio < 1 else x * 0


@OPS.register("Celu", since=12)
def celu(x, *, alpha=1.0):
    return alpha * tf.nn.elu(x / alpha)  # TensorFlow has no celu: ELU of x / alpha, scaled back
