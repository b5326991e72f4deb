"""Fourier transforms and windows (torch.fft, torch.stft, torch.hann_window in a model's forward).
ONNX carries a complex tensor as a trailing dimension of 2 (real, imaginary); a real one as 1."""
import math

import torch

from backends.torch.ops import OPS
from backends.torch.ops._util import ONNX_TO_TORCH, ints


def _complex(x):
    return torch.view_as_complex(x.contiguous()) if x.shape[-1] == 2 else x[..., 0]


@OPS.register("DFT", since=20)
def dft(x, dft_length=None, axis=None, *, inverse=0, onesided=0):
    z = _complex(x)
    a = ints(axis)[0] if axis is not None else -2
    a = a + x.dim() if a < 0 else a  # counted on the input, whose last dim is the (real, imaginary) pair
    n = ints(dft_length)[0] if dft_length is not None else None
    if inverse and onesided:  # the inverse of a one-sided spectrum: a real signal of length n
        return torch.fft.irfft(z, n=n, dim=a).unsqueeze(-1)
    y = torch.fft.ifft(z, n=n, dim=a) if inverse else torch.fft.fft(z, n=n, dim=a)
    if onesided:
        y = y.narrow(a, 0, y.shape[a] // 2 + 1)
    return torch.view_as_real(y)


@OPS.register("STFT", since=17)
def stft(signal, frame_step, window=None, frame_length=None, *, onesided=1):
    z = _complex(signal)
    length = ints(frame_length)[0] if frame_length is not None else window.shape[0]
    frames = z.unfold(-1, length, ints(frame_step)[0])  # (batch, frames, length)
    if window is not None:
        frames = frames * window
    y = torch.fft.fft(frames, dim=-1)
    if onesided:
        y = y[..., :length // 2 + 1]
    return torch.view_as_real(y)


def _window(name, a):
    """ONNX's cosine-sum windows: sum_j (-1)^j a_j cos(2 pi j k / N), N = size (periodic) or size - 1."""
    @OPS.register(name, since=17)
    def window(size, *, output_datatype=1, periodic=1):
        n = ints(size)[0]
        k = torch.arange(n, dtype=torch.float64)
        denom = n if periodic else max(n - 1, 1)
        w = sum((-1) ** j * c * torch.cos(2 * math.pi * j * k / denom) for j, c in enumerate(a))
        return w.to(ONNX_TO_TORCH[output_datatype])
    window.__name__ = name.lower()
    return window


_window("HannWindow", [0.5, 0.5])
_window("HammingWindow", [25 / 46, 21 / 46])  # ONNX's coefficients (torch.hamming_window's are 0.54, 0.46)
_window("BlackmanWindow", [0.42, 0.5, 0.08])
