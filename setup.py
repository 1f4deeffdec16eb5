"""Builds the extension module kiln._kiln with the project's CMake build (python/CMakeLists.txt)
for the interpreter pip runs; pyproject.toml has the rest. KILN_BUILD_DIR reuses a configured
build folder instead of a fresh one."""
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.environ.get("KILN_BUILD_DIR") or os.path.join(os.path.abspath(self.build_temp),
                                                                 "cmake")
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                                   "-DBUILD_TESTING=OFF", "-DPython_EXECUTABLE=" + sys.executable]
                                  + (["-G", "Ninja"] if shutil.which("ninja") else []))
        subprocess.check_call(["cmake", "--build", build, "--target", "kiln_python", "-j",
                               str(os.cpu_count() or 1)])
        built = os.path.join(build, "python", "kiln", os.path.basename(self.get_ext_filename(
            ext.name)))
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built, target)


setup(ext_modules=[Extension("kiln._kiln", sources=[])], cmdclass={"build_ext": CMakeBuild},
      options={"build": {"build_base": os.path.join("build", "pip")},
               "egg_info": {"egg_base": os.path.join("build", "pip")}})
