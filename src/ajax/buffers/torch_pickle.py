"""Read ``torch.save`` files of tensors and TensorDicts as numpy, without torch.

The official TD-MPC2 datasets are ``torch.save``d TensorDicts (trainer/offline_trainer.py
``torch.load(fp)``). A torch file (the zip format of torch >= 1.6,
torch/serialization.py ``_save``) is a zip archive ``<name>/data.pkl`` + ``<name>/data/<key>``:
the pickle names each tensor's storage by a persistent id ``("storage", StorageType, key,
location, numel)`` and rebuilds it with ``torch._utils._rebuild_tensor_v2(storage, offset, size,
stride, ...)``; the raw bytes of storage ``key`` are ``data/<key>`` (``byteorder`` says their
endianness). tensordict (0.8, _reductions.py ``_reduce_td``) pickles a TensorDict as
``_make_td(cls, state)`` with ``state["_tensordict"]`` its entries, each a tensor or a nested
TensorDict.

Only those globals are resolved (a restricted unpickler: nothing else in the file is run), so
other pickles raise :class:`UnsupportedPickle` and the caller may fall back to torch itself.
"""

from __future__ import annotations

import collections
import pickle
import zipfile
from pathlib import Path

import numpy as np

_STORAGE_DTYPES = {
    "FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
    "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16,
    "CharStorage": np.int8, "ByteStorage": np.uint8, "BoolStorage": np.bool_,
}  # fmt: skip


class UnsupportedPickle(ValueError):
    """The file is not a torch zip pickle of tensors/TensorDicts that this reader knows."""


class _Storage(str):
    """A storage type named in the pickle (its numpy dtype from the name)."""


class _TensorDictClass:
    """Stands for ``tensordict._td.TensorDict``: its instances load as plain dicts."""


def _rebuild_tensor_v2(storage, offset, size, stride, *_):
    itemsize = storage.itemsize
    if not size:
        return storage[offset].copy()
    view = np.lib.stride_tricks.as_strided(
        storage[offset:], shape=tuple(size), strides=tuple(s * itemsize for s in stride)
    )
    return view.copy()


def _make_td(cls, state):
    return dict(state["_tensordict"])


_GLOBALS = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch", "Size"): tuple,
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("tensordict._reductions", "_make_td"): _make_td,
    ("tensordict._td", "TensorDict"): _TensorDictClass,
    **{("torch", name): _Storage(name) for name in _STORAGE_DTYPES},
}


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, archive: zipfile.ZipFile, prefix: str, byteorder: str):
        super().__init__(file)
        self._archive, self._prefix = archive, prefix
        self._order = "<" if byteorder == "little" else ">"
        self._storages: dict[str, np.ndarray] = {}

    def find_class(self, module, name):
        try:
            return _GLOBALS[(module, name)]
        except KeyError:
            raise UnsupportedPickle(f"unsupported global {module}.{name}") from None

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and pid and pid[0] == "storage"):
            raise UnsupportedPickle(f"unsupported persistent id {pid!r}")
        kind, key = pid[1], str(pid[2])
        if key not in self._storages:
            dtype = np.dtype(_STORAGE_DTYPES[str(kind)]).newbyteorder(self._order)
            raw = self._archive.read(f"{self._prefix}data/{key}")
            self._storages[key] = np.frombuffer(raw, dtype).astype(dtype.newbyteorder("="))
        return self._storages[key]


def load(path: str | Path):
    """The object ``torch.save`` wrote to ``path``, tensors as numpy arrays and TensorDicts as
    dicts of them. UnsupportedPickle if the file holds anything else."""
    if not zipfile.is_zipfile(path):
        raise UnsupportedPickle(f"{path} is not a torch zip archive (legacy torch.save format)")
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        pkl = next((n for n in names if n.endswith("/data.pkl")), None)
        if pkl is None:
            raise UnsupportedPickle(f"{path} has no data.pkl")
        prefix = pkl[: -len("data.pkl")]
        order = f"{prefix}byteorder"
        byteorder = archive.read(order).decode() if order in names else "little"
        with archive.open(pkl) as f:
            return _Unpickler(f, archive, prefix, byteorder).load()
