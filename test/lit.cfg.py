# -*- Python -*-
# lit configuration for offload's tests.
import os
import lit.formats
from lit.llvm import llvm_config

config.name = "OFFLOAD"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.offload_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs", "Python",
                   "drivers"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%python_torch", config.offload_python))
config.substitutions.append(("%offload_src", config.offload_src_root))
config.substitutions.append(("%offload_bin", config.offload_tools_dir))

# The Python test drivers (test/drivers: check_*.py and their helpers) run as
# `%python_torch %drivers/check_model.py ...`. They import each other, the
# example models and oracles of python/ (export_models, reference) and the
# package offload (the build's python/: the extension beside a link to the
# package) from this PYTHONPATH, and run them with `python -m NAME`.
drivers = os.path.join(config.offload_src_root, "test", "drivers")
config.substitutions.append(("%drivers", drivers))
config.environment["PYTHONPATH"] = os.pathsep.join(
    [drivers, os.path.join(config.offload_src_root, "python"),
     os.path.join(config.offload_obj_root, "python")])

# PyTorch 2.x (scripts/setup-torch2.sh) for the .pt2 tests: torch.export at
# test time. Without the virtual environment those tests are unsupported.
torch2 = os.path.join(config.offload_src_root, "scripts", "torch2-python")
venv = os.environ.get("OFFLOAD_TORCH2_VENV",
                      os.path.join(config.offload_src_root, ".venv-torch2"))
if os.path.exists(os.path.join(venv, "bin", "python")):
    config.available_features.add("torch2")
    if "OFFLOAD_TORCH2_VENV" in os.environ:
        config.environment["OFFLOAD_TORCH2_VENV"] = os.environ["OFFLOAD_TORCH2_VENV"]
config.substitutions.append(("%torch2_python", torch2))

# target=host reads this machine's calibrated host target file (docs/planner.md,
# "The host target"): OFFLOAD_HOST_TARGET when the environment sets it (ctest's
# fixture host-target.calibrate does), else BUILD/test/host-target.json,
# calibrated here once when missing (offload-run --calibrate, ~3 s).
host_target = os.environ.get("OFFLOAD_HOST_TARGET") or os.path.join(
    config.offload_obj_root, "test", "host-target.json")
if "OFFLOAD_HOST_TARGET" not in os.environ and not os.path.exists(host_target):
    import subprocess
    lit_config.note("calibrating the host target into " + host_target)
    os.makedirs(os.path.dirname(host_target), exist_ok=True)
    subprocess.run([os.path.join(config.offload_tools_dir, "offload-run"), "--calibrate",
                    host_target, "--threads", "1"], check=False)
config.environment["OFFLOAD_HOST_TARGET"] = host_target

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.offload_tools_dir, append_path=True)

tools = ["offload-opt", "offload-translate"]
for t in ["offload-import", "offload-run"]:
    if os.path.exists(os.path.join(config.offload_tools_dir, t)):
        tools.append(t)
        config.available_features.add(t)
llvm_config.add_tool_substitutions(tools, [config.offload_tools_dir])
