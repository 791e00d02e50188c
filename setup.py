"""`pip install .`: the `grove` package (python/grove) with its extension `_grove`, which
grove's own CMake build makes (python/CMakeLists.txt). The CMake build folder is
GROVE_BUILD_DIR when set (an existing one, such as the demo's `build`, makes the install a
copy), else build-pip in the source tree, kept between installs so that a reinstall only
rebuilds what changed."""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.path.join(ROOT, os.environ.get("GROVE_BUILD_DIR") or "build-pip")
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DGROVE_TESTS=OFF",
                                   f"-DPython3_EXECUTABLE={sys.executable}"] + generator)
        subprocess.check_call(["cmake", "--build", build, "-j", str(os.cpu_count() or 1), "--target", "grove_python"])
        built = glob.glob(os.path.join(build, "python", "grove", "_grove*.so"))
        if not built:
            raise RuntimeError(f"grove: the CMake build in {build} made no Python extension "
                               "(it needs pybind11-dev, python3-dev and python3-numpy)")
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(built[0], dest)


os.makedirs(os.path.join(ROOT, "build-pip"), exist_ok=True)  # setup.cfg's egg_base must exist
setup(packages=["grove"], package_dir={"": "python"},
      ext_modules=[Extension("grove._grove", sources=[])], cmdclass={"build_ext": CMakeBuild})
