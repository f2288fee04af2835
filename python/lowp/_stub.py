"""lowp's type stub, written from the signatures the module reports.

    PYTHONPATH=build/python python3 -m lowp._stub > python/lowp/__init__.pyi

The C++ tables (python/lowp_module.cc) are the one source of every
parameter's name, kind, type and default; python/tests/test_arguments.py
checks that the committed stub is this text.
"""

HEADER = '''\
# lowp's types (PEP 561), written by `python3 -m lowp._stub` from the
# signatures the module reports; python/tests/test_arguments.py checks that
# this file is what it writes. Edit python/lowp_module.cc, not this.
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._types import FilePath as FilePath
from ._types import FilePaths as FilePaths
from ._types import Names as Names
from ._types import TensorData as TensorData
'''

WIDTH = 99


def _parameters(spec):
    parts, keyword_only = [], False
    for name, kind, annotation, has_default, default in spec["parameters"]:
        if kind == "keyword_only" and not keyword_only:
            parts.append("*")
            keyword_only = True
        parts.append(f"{name}: {annotation}" + (f" = {default!r}" if has_default else ""))
    return parts


def _docstring(doc):
    assert '"""' not in doc and "\\" not in doc, doc
    words, lines, line = doc.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > WIDTH - 4:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    if len(lines) == 1 and len(lines[0]) <= WIDTH - 10:
        return f'    """{lines[0]}"""\n'
    return '    """' + "\n    ".join(lines) + '\n    """\n'


def _function(name, spec):
    parameters = _parameters(spec)
    head = f"def {name}({', '.join(parameters)}) -> {spec['returns']}:"
    if len(head) > WIDTH:
        head = (f"def {name}(\n" + "".join(f"    {p},\n" for p in parameters)
                + f") -> {spec['returns']}:")
    return f"{head}\n{_docstring(spec['doc'])}    ...\n"


def text():
    """The stub of the module as built: lowp/__init__.pyi."""
    import lowp
    from lowp import _lowp

    functions = [_function(name, spec) for name, spec in sorted(_lowp._signatures.items())]
    names = "".join(f'    "{name}",\n' for name in lowp.__all__)
    return HEADER + f"\n__all__ = [\n{names}]\n\n\n" + "\n\n".join(functions)


if __name__ == "__main__":
    print(text(), end="")
