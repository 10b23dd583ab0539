"""Where the package finds the compiler's tools and the runtime's extension.

The build puts the extension `_offload_runtime` in BUILD/python/ and the tools
in BUILD/bin/ (scripts/setup.sh); BUILD/python/offload is a link to this
package. `pip install .` (pyproject.toml) puts the extension beside the package
and the tools in offload/bin/. OFFLOAD_BIN overrides the tools' folder.
"""
import os
import shutil

from .errors import OffloadError
from .errors import _offload_runtime as runtime


def bin_dir():
    """The folder of offload-import, offload-opt and offload-translate:
    $OFFLOAD_BIN, else the package's bin/ (a pip-installed package,
    pyproject.toml), else the build's bin/ next to the extension's python/
    folder."""
    env = os.environ.get("OFFLOAD_BIN")
    if env:
        return env
    installed = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")
    if os.path.isdir(installed):
        return installed
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(runtime.__file__))),
                        "bin")


def tool(name):
    """Absolute path of the tool `name`; OffloadError when it is missing."""
    path = os.path.join(bin_dir(), name)
    if os.path.isfile(path) and os.access(path, os.X_OK):
        return path
    found = shutil.which(name)
    if found:
        return found
    raise OffloadError(f"offload: tool '{name}' not found in {bin_dir()} nor on PATH; "
                       "build the project (scripts/setup.sh) or set OFFLOAD_BIN")
