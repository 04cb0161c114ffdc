"""Exceptions: one class per nvfp4_status, all deriving from nvfp4.Error.

nvfp4.Error is a RuntimeError, so callers that already catch RuntimeError
(comfy-kitchen's layout falls back to dequantization on one) keep working.
Each subclass also derives from the closest built-in (ValueError,
MemoryError, OSError, LookupError) so ordinary handlers catch it too.
"""
from . import _lib


class Error(RuntimeError):
    """A libnvfp4 call failed.

    Attributes:
        status: the nvfp4_status code (int).
        status_name: its name ("invalid argument", ...).
        function: the C function that failed.
        message: the library's one-line message (nvfp4_last_error()).
    """

    def __init__(self, status, function, message):
        self.status = status
        self.status_name = _lib.STATUS_NAMES.get(status, f"status {status}")
        self.function = function
        self.message = message
        super().__init__(f"{function}: {self.status_name}: {message}")


class InvalidArgumentError(Error, ValueError):
    """NVFP4_ERR_INVALID_ARGUMENT: an argument is out of contract."""


class OutOfMemoryError(Error, MemoryError):
    """NVFP4_ERR_OUT_OF_MEMORY"""


class FileIOError(Error, OSError):
    """NVFP4_ERR_IO: open/read/write/rename failed."""


class MalformedError(Error, ValueError):
    """NVFP4_ERR_MALFORMED: a file's bytes break its format."""


class NotFoundError(Error, LookupError):
    """NVFP4_ERR_NOT_FOUND: a named tensor or layer is absent."""


class UnsupportedError(Error):
    """NVFP4_ERR_UNSUPPORTED: valid, but not handled (dtype, shape, device)."""


class NoDeviceError(Error):
    """NVFP4_ERR_NO_DEVICE: no usable CUDA device, or a build without CUDA."""


class CudaError(Error):
    """NVFP4_ERR_CUDA: a CUDA runtime call failed."""


class InternalError(Error):
    """NVFP4_ERR_INTERNAL"""


class NonFiniteWarning(RuntimeWarning):
    """NaN or Inf in an input, or produced from one: which tensor, which
    element, what became NaN (strict=True raises instead)."""


BY_STATUS = {
    1: InvalidArgumentError, 2: OutOfMemoryError, 3: FileIOError, 4: MalformedError,
    5: NotFoundError, 6: UnsupportedError, 7: NoDeviceError, 8: CudaError, 9: InternalError,
}


def check(status, function):
    """Raise the Error subclass for a failed status, with the library's message."""
    if status == _lib.OK:
        return
    raw = _lib.lib().nvfp4_last_error()
    message = raw.decode("utf-8", "replace") if raw else ""
    raise BY_STATUS.get(status, Error)(status, function, message)
