"""The argument types lowp's signatures name (lowp/__init__.pyi imports them).

FilePath is what the functions take as a file or directory name: a str, bytes
or os.PathLike, encoded as os.fsencode does. A list argument takes a list or a
tuple; Names also a str of comma-separated names ("bf16,nf4").
"""
import os
from typing import Mapping, Sequence, Union

from numpy.typing import ArrayLike

FilePath = Union[str, bytes, os.PathLike[str], os.PathLike[bytes]]
FilePaths = Union[FilePath, Sequence[FilePath]]
Names = Union[str, Sequence[str]]
# A checkpoint (a path or a list of paths), an array, or a dict of arrays by name.
TensorData = Union[FilePath, Sequence[FilePath], Mapping[str, ArrayLike], ArrayLike]
