"""The Keras WideResNet of ../shared/seeds/004 (tests/tf_models.py, padding='same' at stride 2) saved by
TensorFlow and exported as a bundle, for the TensorFlow tests; runs on the host."""
from pathlib import Path

import numpy as np

from irtrace.cli import main

TESTS = Path(__file__).parent
_SCRIPT = ("import sys; sys.path.insert(0, sys.argv[3]); import numpy as np, tf_models; m = tf_models.wideresnet(); "
           "m.save(sys.argv[1]); np.savez(sys.argv[2], **{v.path: v.numpy() for v in m.weights}); "
           "m.export(sys.argv[1] + '.saved')")


def keras_wideresnet(d, run):
    """(folder, weights by Keras path, input) after writing into `d`: wrn.keras and its SavedModel
    wrn.keras.saved, w.npz (the weights), x.npz (the input) and tf.irt (the bundle `irtrace export --from
    tensorflow` makes). `run(args)`: a subprocess.CompletedProcess of Python in TensorFlow's environment."""
    r = run(["-c", _SCRIPT, str(d / "wrn.keras"), str(d / "w.npz"), str(TESTS)])
    assert r.returncode == 0, r.stderr[-2000:]
    x = np.random.default_rng(0).standard_normal((2, 8, 8, 3)).astype(np.float32)
    np.savez(d / "x.npz", x=x)
    assert main(["export", "--from", "tensorflow", str(d / "wrn.keras"), "--input-file", str(d / "x.npz"),
                 "-o", str(d / "tf.irt")]) == 0
    return d, dict(np.load(d / "w.npz")), x
